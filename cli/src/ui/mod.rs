//! `otelprof serve`'s web UI: a single page (plain HTML, CSS and JavaScript in `assets/`, with
//! the HTML files' flame graph viewer, [`crate::flame::VIEWER`], embedded in the binary:
//! nothing is fetched from elsewhere, it works offline) and the JSON answers it shows
//! ([`api`], the CLI's answers serialised), plus exports ([`export`]).
//!
//! Routes: the views `/`, `/traces`, `/trace/<trace_id>`, `/diff`, `/leaks`, `/callers`
//! (the butterfly view) and `/instances` all serve the page, which reads its URL (query
//! parameters are the CLI's flags, [`params`]); the page asks `/api/<view>?<the same
//! parameters>`.
//!
//! Security, with the receiver's rules ([`crate::commands::serve`] refuses a non-loopback UI
//! without `--token`): with a token, every `/api/` request must carry it (`Authorization:
//! Bearer`, which the page asks for once and keeps for the tab); without one (loopback only),
//! requests must name a loopback host, so that a web page elsewhere cannot read the profiles
//! through DNS rebinding. The page's Content-Security-Policy allows only its own scripts.
//! Queries read the store on blocking threads, at most [`CONCURRENT_QUERIES`] at once, so the
//! UI never starves the receiver.
//!
//! Module map: `params` (leaf), `api` and `export` (over `params`), `butterfly` (over `api`
//! and `params`), this file wires them; `serve` (the command) starts them with the receiver.

mod api;
mod butterfly;
mod export;
mod params;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use otelprof_receiver::{token_matches, Handler, ResponseBody};
use params::Params;

/// Queries computed at once: the machine's other work (receiving) keeps a core.
pub const CONCURRENT_QUERIES: usize = 2;

const INDEX: &str = include_str!("assets/index.html");

const JS: &str = "text/javascript; charset=utf-8";

/// The page's scripts and style, by path: (path, content type, content).
const ASSETS: [(&str, &str, &str); 9] = [
    ("/dom.js", JS, include_str!("assets/dom.js")),
    ("/trend.js", JS, include_str!("assets/trend.js")),
    ("/focus.js", JS, include_str!("assets/focus.js")),
    ("/butterfly.js", JS, include_str!("assets/butterfly.js")),
    ("/findings.js", JS, include_str!("assets/findings.js")),
    ("/flame.js", JS, crate::flame::VIEWER),
    ("/agents.js", JS, include_str!("assets/agents.js")),
    ("/app.js", JS, include_str!("assets/app.js")),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
];

/// What every request of the UI needs.
struct State {
    store: PathBuf,
    token: Option<String>,
    queries: Semaphore,
    /// The OpAMP server's agents (`crate::opamp`), served on this listener.
    agents: Arc<crate::opamp::Agents>,
}

impl State {
    fn new(store: PathBuf, token: Option<String>) -> Arc<State> {
        Arc::new(State {
            store,
            token,
            queries: Semaphore::new(CONCURRENT_QUERIES),
            agents: Arc::default(),
        })
    }
}

fn response(
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::new(Full::new(Bytes::from(body))));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn error(status: StatusCode, message: &str) -> Response<ResponseBody> {
    response(
        status,
        "application/json",
        serde_json::json!({ "error": message })
            .to_string()
            .into_bytes(),
    )
}

/// Whether the request names a loopback host (`127.0.0.1:4040`, `localhost`, `[::1]`).
fn loopback_host(request: &Request<Incoming>) -> bool {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().host())
        .unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The view pages: every one is the same page, which routes on its URL.
fn is_page(path: &str) -> bool {
    matches!(
        path,
        "/" | "/traces" | "/diff" | "/leaks" | "/callers" | "/instances"
    ) || path
        .strip_prefix("/trace/")
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<ResponseBody> {
    if crate::opamp::serves(request.uri().path()) {
        // OpAMP and the agents' API: POST too, under the same host and token rules.
        let path = request.uri().path().to_owned();
        let authorization = request.headers().get(header::AUTHORIZATION);
        if state.token.is_none() && !loopback_host(&request) {
            return crate::opamp::refuse(
                &path,
                StatusCode::FORBIDDEN,
                "loopback host names only without --token",
            );
        }
        if !token_matches(
            state.token.as_deref(),
            authorization.map(HeaderValue::as_bytes),
        ) {
            return crate::opamp::refuse(
                &path,
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: send the header Authorization: Bearer <token>",
            );
        }
        return crate::opamp::handle(state.agents.clone(), request).await;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return error(StatusCode::METHOD_NOT_ALLOWED, "the UI answers GET only");
    }
    if state.token.is_none() && !loopback_host(&request) {
        return error(
            StatusCode::FORBIDDEN,
            "this UI answers on loopback names only (127.0.0.1, localhost, [::1]); serve it \
             with --token to reach it by other names",
        );
    }
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    if let Some(&(_, content_type, body)) = ASSETS.iter().find(|a| a.0 == path) {
        return response(StatusCode::OK, content_type, body.into());
    }
    match path.as_str() {
        // Browsers ask for it on their own; no icon, and no 404 in the console.
        "/favicon.ico" => return response(StatusCode::NO_CONTENT, "image/x-icon", Vec::new()),
        p if is_page(p) => {
            return response(StatusCode::OK, "text/html; charset=utf-8", INDEX.into())
        }
        _ => {}
    }
    let Some(endpoint) = path.strip_prefix("/api/") else {
        return error(StatusCode::NOT_FOUND, "no such page");
    };
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if !token_matches(state.token.as_deref(), authorization) {
        return error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: send the header Authorization: Bearer <token>",
        );
    }
    let endpoint = endpoint.to_owned();
    let Ok(_permit) = state.queries.acquire().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    };
    let store = state.store.clone();
    let answer =
        tokio::task::spawn_blocking(move || answer(&store, &endpoint, &Params::parse(&query)))
            .await;
    match answer {
        Ok(r) => r,
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the query failed"),
    }
}

/// The answer of one `/api/` endpoint; runs on a blocking thread.
fn answer(store: &std::path::Path, endpoint: &str, p: &Params) -> Response<ResponseBody> {
    let json = |r: Result<String, String>| match r {
        Ok(body) => response(StatusCode::OK, "application/json", body.into_bytes()),
        Err(e) => error(StatusCode::BAD_REQUEST, &e),
    };
    match endpoint {
        "top" => json(api::top(store, p)),
        "timeline" => json(api::timeline(store, p)),
        "trend" => json(api::trend(store, p)),
        "traces" => json(api::traces(store, p)),
        "leaks" => json(api::leaks(store, p)),
        "findings" => json(api::findings(store, p)),
        "trace" => json(api::trace(store, p)),
        "diff" => json(api::compare(store, p)),
        "butterfly" => json(butterfly::answer(store, p)),
        "instances" => json(api::instances(store)),
        "values" => json(api::values(store)),
        e => match e.strip_prefix("export/") {
            Some(view) => match export::export(store, view, p) {
                Ok(d) => {
                    let mut r = response(StatusCode::OK, d.content_type, d.bytes);
                    if let Ok(v) =
                        HeaderValue::from_str(&format!("attachment; filename=\"{}\"", d.name))
                    {
                        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
                    }
                    r
                }
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
            },
            None => error(StatusCode::NOT_FOUND, "no such API endpoint"),
        },
    }
}

/// The UI over `store`, as the request handler of the receiver's extra listener (see
/// [`crate::commands::serve::Ui`]).
pub fn over_store(store: PathBuf, token: Option<String>) -> Handler {
    let state = State::new(store, token);
    Arc::new(move |request| {
        let state = state.clone();
        Box::pin(handle(state, request))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_the_views() {
        for p in [
            "/",
            "/traces",
            "/diff",
            "/leaks",
            "/callers",
            "/instances",
            "/trace/0af7651916cd43dd8448eb211c80319c",
        ] {
            assert!(is_page(p), "{p}");
        }
        for p in ["/trace/", "/trace/../x", "/etc/passwd", "/api/top"] {
            assert!(!is_page(p), "{p}");
        }
    }
}
