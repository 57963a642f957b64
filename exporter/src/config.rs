//! OTLP exporter configuration: the standard `OTEL_EXPORTER_OTLP_*` variables and the agent's
//! `endpoint=` / `protocol=` options.
//!
//! The environment is read in one place, [`OtlpConfig::resolve`], through a lookup closure,
//! so tests pass a map and the agent passes `std::env::var`. Signal-specific variables
//! (`…_PROFILES_…`) win over the generic ones; agent options win over both (they are the
//! most specific setting a user can give one JVM). The variables, their defaults and
//! formats: <https://opentelemetry.io/docs/specs/otel/protocol/exporter/>; what users set is
//! in README.md ("OTLP export").

use std::path::PathBuf;
use std::time::Duration;

use otel_bridge::resource::percent_decode;

/// Variable names, as the OTLP exporter specification spells them
/// (<https://opentelemetry.io/docs/specs/otel/protocol/exporter/#configuration-options>).
pub mod env {
    pub const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
    pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
    pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
    pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
    pub const PROFILES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT";
    pub const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
    pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
    pub const PROFILES_HEADERS: &str = "OTEL_EXPORTER_OTLP_PROFILES_HEADERS";
    pub const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
    pub const PROFILES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL";
    pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
    pub const PROFILES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT";
    pub const COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
    pub const PROFILES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION";
    pub const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
    pub const PROFILES_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE";
    /// `none` turns the agent's own metrics off
    /// (<https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/#exporter-selection>).
    pub const METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
}

/// Default OTLP timeout (OTel specification: 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound of the export queue.
pub const DEFAULT_QUEUE_BYTES: usize = 16 << 20;
/// How long one request is retried after its first failure before it is dropped: 5 minutes,
/// the Collector's `retry_on_failure.max_elapsed_time` default. Long enough that a receiver
/// restarting or a disk being cleaned loses nothing; short enough that a request a server
/// will never take (one answering a retryable code to an oversized request) holds the ones
/// queued behind it back for minutes, not for as long as the process runs.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(300);
/// HTTP paths appended to a base endpoint.
pub const HTTP_PROFILES_PATH: &str = otel_bridge::otlp::HTTP_PATH;
pub const HTTP_METRICS_PATH: &str = "/v1/metrics";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

impl Protocol {
    pub fn parse(s: &str) -> Option<Protocol> {
        match s.trim() {
            "grpc" => Some(Protocol::Grpc),
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// Everything the OTLP exporter needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpConfig {
    pub protocol: Protocol,
    /// Full URL profiles are sent to: for HTTP including the path
    /// (`http://host:4318/v1development/profiles`), for gRPC scheme and authority.
    pub profiles_endpoint: String,
    /// Where the agent's own metrics go, in the same protocol; `None` turns them off.
    pub metrics_endpoint: Option<String>,
    /// Sent with every request (HTTP headers, gRPC metadata).
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub compression: Compression,
    /// PEM file of CA certificates to trust, besides the system's and the Mozilla roots.
    pub certificate: Option<PathBuf>,
    pub queue_bytes: usize,
    /// How long one request is retried after its first failure before it is dropped (see
    /// [`DEFAULT_RETRY_BUDGET`]).
    pub retry_budget: Duration,
}

/// What the agent's options contribute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentOtlpOptions {
    /// `endpoint=`: a base URL, like `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `protocol=`.
    pub protocol: Option<Protocol>,
}

/// A setting that cannot be used; the exporter stays off and the caller reports it. Values are
/// quoted with [`echo`]: an error line is short and prints no control characters, whatever
/// the environment held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}=\"{}\": expected grpc or http/protobuf", echo(.value))]
    BadProtocol { var: &'static str, value: String },
    #[error("{var}=\"{}\": expected a whole number of milliseconds", echo(.value))]
    BadTimeout { var: &'static str, value: String },
    #[error("{var}=\"{}\": expected gzip or none", echo(.value))]
    BadCompression { var: &'static str, value: String },
    /// Headers carry credentials (`authorization=Bearer …`): the error names the entry by
    /// its position and never shows it.
    #[error(
        "{var}: entry {entry} is not key=value with complete percent-escapes \
         (entries are counted from 1; their text is not shown, headers hold secrets)"
    )]
    BadHeaders { var: &'static str, entry: usize },
    #[error("{what} \"{}\" is not an http:// or https:// URL", echo(.value))]
    BadEndpoint { what: &'static str, value: String },
    #[error("{var}=\"{}\": expected a duration of 100ms to 1h, e.g. 5s", echo(.value))]
    BadInterval { var: &'static str, value: String },
}

/// How much of a value an error message shows (characters).
pub const ECHO_CHARS: usize = 64;

/// A value from outside (an option, an environment variable) as an error message shows it: cut
/// after [`ECHO_CHARS`] characters with `…`, and with control characters escaped (`\x1b`,
/// `\u{202e}`), so that a log line stays one short line that cannot steer the terminal or
/// the log viewer it ends up in.
pub fn echo(value: &str) -> String {
    inert(value, ECHO_CHARS)
}

/// `value` with control characters escaped, cut after `max_chars` characters.
fn inert(value: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (i, c) in value.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        let bidi = matches!(c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}');
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if c.is_control() || bidi => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Bytes for people: `64 KiB`, `16 MiB`, `1.5 GiB`, `100 bytes` (binary units, the ones the
/// size options take). The agent's and the exporter's messages all say sizes this way.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {}", UNITS[unit])
}

impl OtlpConfig {
    /// Resolves the configuration. `Ok(None)` when no endpoint is configured at all (OTLP
    /// export stays off; the agent writes files as before).
    pub fn resolve(
        lookup: impl Fn(&str) -> Option<String>,
        agent: &AgentOtlpOptions,
    ) -> Result<Option<OtlpConfig>, ConfigError> {
        let settings = Settings(lookup);
        let protocol = match agent.protocol {
            Some(p) => p,
            None => settings.protocol()?,
        };
        let Some((profiles_endpoint, metrics_endpoint)) = settings.endpoints(agent, protocol)?
        else {
            return Ok(None);
        };
        Ok(Some(OtlpConfig {
            protocol,
            profiles_endpoint,
            metrics_endpoint,
            headers: settings.headers()?,
            timeout: settings.timeout()?,
            compression: settings.compression()?,
            certificate: settings
                .pick(env::PROFILES_CERTIFICATE, env::CERTIFICATE)
                .map(|(_, path)| PathBuf::from(path.trim())),
            queue_bytes: DEFAULT_QUEUE_BYTES,
            retry_budget: DEFAULT_RETRY_BUDGET,
        }))
    }
}

/// The environment as [`OtlpConfig::resolve`] reads it, through its lookup function.
struct Settings<F>(F);

impl<F: Fn(&str) -> Option<String>> Settings<F> {
    /// The variable `name`, when it is set and not blank.
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.trim().is_empty())
    }

    /// The first of (specific, generic) that is set, with the name it came from.
    fn pick(
        &self,
        specific: &'static str,
        generic: &'static str,
    ) -> Option<(&'static str, String)> {
        self.get(specific)
            .map(|v| (specific, v))
            .or_else(|| self.get(generic).map(|v| (generic, v)))
    }

    fn protocol(&self) -> Result<Protocol, ConfigError> {
        match self.pick(env::PROFILES_PROTOCOL, env::PROTOCOL) {
            Some((var, v)) => Protocol::parse(&v).ok_or(ConfigError::BadProtocol {
                var,
                value: v.clone(),
            }),
            // The OTel specification's default.
            None => Ok(Protocol::HttpProtobuf),
        }
    }

    /// Where profiles go and where the agent's metrics go; `None` when no endpoint is set.
    fn endpoints(
        &self,
        agent: &AgentOtlpOptions,
        protocol: Protocol,
    ) -> Result<Option<(String, Option<String>)>, ConfigError> {
        // Endpoint: the agent's base URL, else the profiles URL (used as is), else the
        // generic base URL.
        let base = agent
            .endpoint
            .clone()
            .map(|e| ("endpoint=", e))
            .or_else(|| self.get(env::ENDPOINT).map(|e| (env::ENDPOINT, e)));
        let specific = self.get(env::PROFILES_ENDPOINT);
        let profiles_endpoint = match (&agent.endpoint, specific, &base) {
            (None, Some(url), _) => {
                check_url(env::PROFILES_ENDPOINT, &url)?;
                url.trim().to_owned()
            }
            (_, _, Some((what, url))) => {
                check_url(what, url)?;
                join_base(url, protocol, HTTP_PROFILES_PATH)
            }
            (_, None, None) | (Some(_), _, None) => return Ok(None),
        };

        let metrics_off = self
            .get(env::METRICS_EXPORTER)
            .is_some_and(|v| v.trim() == "none");
        let metrics_endpoint = if metrics_off {
            None
        } else if let Some(url) = self.get(env::METRICS_ENDPOINT) {
            check_url(env::METRICS_ENDPOINT, &url)?;
            Some(url.trim().to_owned())
        } else if let Some((_, url)) = &base {
            Some(join_base(url, protocol, HTTP_METRICS_PATH))
        } else {
            // Only a profiles URL was given: send metrics to the same server.
            Some(join_base(
                &origin(&profiles_endpoint),
                protocol,
                HTTP_METRICS_PATH,
            ))
        };
        Ok(Some((profiles_endpoint, metrics_endpoint)))
    }

    fn headers(&self) -> Result<Vec<(String, String)>, ConfigError> {
        match self.pick(env::PROFILES_HEADERS, env::HEADERS) {
            Some((var, v)) => {
                parse_key_values(&v).map_err(|entry| ConfigError::BadHeaders { var, entry })
            }
            None => Ok(Vec::new()),
        }
    }

    fn timeout(&self) -> Result<Duration, ConfigError> {
        match self.pick(env::PROFILES_TIMEOUT, env::TIMEOUT) {
            Some((var, v)) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
                .ok_or(ConfigError::BadTimeout { var, value: v }),
            None => Ok(DEFAULT_TIMEOUT),
        }
    }

    fn compression(&self) -> Result<Compression, ConfigError> {
        match self.pick(env::PROFILES_COMPRESSION, env::COMPRESSION) {
            Some((var, v)) => match v.trim() {
                "gzip" => Ok(Compression::Gzip),
                "none" => Ok(Compression::None),
                _ => Err(ConfigError::BadCompression { var, value: v }),
            },
            // Profiles compress 3-5x and every OTLP receiver accepts gzip; the SDKs' default
            // (none) would send several times the bytes.
            None => Ok(Compression::Gzip),
        }
    }
}

/// Human summary of a configuration, for the agent's start line: where profiles go (without
/// any `user:password@` the URL carries: logs are read by more people than the config), how,
/// and how much the queue holds while the endpoint is away.
pub fn describe(config: &OtlpConfig) -> String {
    format!(
        "{} ({}{}, queue {})",
        shown_endpoint(&config.profiles_endpoint),
        config.protocol.name(),
        match config.compression {
            Compression::Gzip => ", gzip",
            Compression::None => "",
        },
        format_size(config.queue_bytes as u64)
    )
}

/// An endpoint URL as log lines show it: credentials replaced by `***`, control characters
/// escaped (it was checked to be a URL, and is shown whole).
pub fn shown_endpoint(url: &str) -> String {
    inert(&without_userinfo(url), usize::MAX)
}

/// `url` with the credentials of its authority, if any, replaced by `***`.
fn without_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end], &rest[at..]),
        None => url.to_owned(),
    }
}

fn check_url(what: &'static str, url: &str) -> Result<(), ConfigError> {
    let u = url.trim();
    let rest = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
        _ => Err(ConfigError::BadEndpoint {
            what,
            value: url.to_owned(),
        }),
    }
}

/// `scheme://authority` of a URL already checked by [`check_url`].
fn origin(url: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    match url[scheme_end..].find('/') {
        Some(i) => url[..scheme_end + i].to_owned(),
        None => url.to_owned(),
    }
}

/// A base endpoint for one signal: HTTP appends the signal's path ("the signal path is
/// appended to the base URL",
/// <https://opentelemetry.io/docs/specs/otel/protocol/exporter/#endpoint-urls-for-otlphttp>);
/// gRPC uses scheme and authority only.
fn join_base(base: &str, protocol: Protocol, path: &str) -> String {
    let base = base.trim();
    match protocol {
        Protocol::HttpProtobuf => format!("{}{path}", base.trim_end_matches('/')),
        Protocol::Grpc => origin(base),
    }
}

/// `k1=v1,k2=v2` with percent-decoded keys and values, the format of
/// `OTEL_EXPORTER_OTLP_HEADERS`
/// (<https://opentelemetry.io/docs/specs/otel/protocol/exporter/#specifying-headers-via-environment-variables>).
/// A malformed entry is an error naming its position (from 1), not its text.
pub fn parse_key_values(raw: &str) -> Result<Vec<(String, String)>, usize> {
    let mut out = Vec::new();
    let entries = raw.split(',').map(str::trim).filter(|e| !e.is_empty());
    for (i, entry) in entries.enumerate() {
        let decoded = entry.split_once('=').and_then(|(k, v)| {
            let k = percent_decode(k.trim()).filter(|k| !k.is_empty())?;
            Some((k, percent_decode(v.trim())?))
        });
        out.push(decoded.ok_or(i + 1)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(
        vars: &[(&str, &str)],
        agent: AgentOtlpOptions,
    ) -> Result<Option<OtlpConfig>, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OtlpConfig::resolve(|k| map.get(k).cloned(), &agent)
    }

    #[test]
    fn nothing_configured_means_off() {
        assert_eq!(resolve(&[], AgentOtlpOptions::default()).unwrap(), None);
        // A protocol alone does not turn export on.
        assert_eq!(
            resolve(&[(env::PROTOCOL, "grpc")], AgentOtlpOptions::default()).unwrap(),
            None
        );
    }

    #[test]
    fn base_endpoint_gets_signal_paths_for_http() {
        let c = resolve(
            &[(env::ENDPOINT, "http://collector:4318/")],
            AgentOtlpOptions::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(
            c.profiles_endpoint,
            "http://collector:4318/v1development/profiles"
        );
        assert_eq!(
            c.metrics_endpoint.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.compression, Compression::Gzip);
        assert_eq!(c.queue_bytes, 16 << 20);
    }

    #[test]
    fn specific_variables_win_and_agent_options_win_over_all() {
        let vars = [
            (env::ENDPOINT, "http://generic:4318"),
            (
                env::PROFILES_ENDPOINT,
                "https://profiles.example:443/custom/path",
            ),
            (env::PROTOCOL, "grpc"),
            (env::PROFILES_PROTOCOL, "http/protobuf"),
            (env::HEADERS, "a=1"),
            (
                env::PROFILES_HEADERS,
                "authorization=Bearer%20xyz,x-scope-orgid=tenant-1",
            ),
            (env::TIMEOUT, "1000"),
            (env::PROFILES_TIMEOUT, "2500"),
            (env::COMPRESSION, "gzip"),
            (env::PROFILES_COMPRESSION, "none"),
        ];
        let c = resolve(&vars, AgentOtlpOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(
            c.profiles_endpoint,
            "https://profiles.example:443/custom/path"
        );
        assert_eq!(
            c.metrics_endpoint.as_deref(),
            Some("http://generic:4318/v1/metrics")
        );
        assert_eq!(
            c.headers,
            vec![
                ("authorization".into(), "Bearer xyz".into()),
                ("x-scope-orgid".into(), "tenant-1".into())
            ]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.compression, Compression::None);

        let agent = AgentOtlpOptions {
            endpoint: Some("http://127.0.0.1:4317/ignored".into()),
            protocol: Some(Protocol::Grpc),
        };
        let c = resolve(&vars, agent).unwrap().unwrap();
        assert_eq!(c.protocol, Protocol::Grpc);
        assert_eq!(c.profiles_endpoint, "http://127.0.0.1:4317");
        assert_eq!(c.metrics_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
    }

    #[test]
    fn only_a_profiles_url_sends_metrics_to_the_same_server() {
        let c = resolve(
            &[(
                env::PROFILES_ENDPOINT,
                "http://h:4040/v1development/profiles",
            )],
            AgentOtlpOptions::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            c.metrics_endpoint.as_deref(),
            Some("http://h:4040/v1/metrics")
        );
        let c = resolve(
            &[
                (
                    env::PROFILES_ENDPOINT,
                    "http://h:4040/v1development/profiles",
                ),
                (env::METRICS_EXPORTER, "none"),
            ],
            AgentOtlpOptions::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.metrics_endpoint, None);
    }

    #[test]
    fn header_escapes_must_be_complete() {
        assert_eq!(
            parse_key_values("k=%E2%82%AC, x%2Dy = a%2Cb").unwrap(),
            vec![
                ("k".into(), "\u{20ac}".into()),
                ("x-y".into(), "a,b".into())
            ]
        );
        assert_eq!(parse_key_values("k=100%"), Err(1));
        assert_eq!(parse_key_values("a=1,k=%zz"), Err(2));
        assert_eq!(parse_key_values("k=%ff"), Err(1), "not UTF-8");
        assert_eq!(
            parse_key_values("a=1, ,=x"),
            Err(2),
            "empty entries are not counted"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        let agent = AgentOtlpOptions {
            endpoint: Some("http://h:1".into()),
            protocol: None,
        };
        let e = resolve(&[(env::PROTOCOL, "http/json")], agent.clone()).unwrap_err();
        assert!(e.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{e}");
        let e = resolve(&[(env::PROFILES_TIMEOUT, "10s")], agent.clone()).unwrap_err();
        assert!(
            e.to_string()
                .contains("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT"),
            "{e}"
        );
        let e = resolve(&[(env::COMPRESSION, "zstd")], agent.clone()).unwrap_err();
        assert!(e.to_string().contains("zstd"), "{e}");
        let e = resolve(&[(env::HEADERS, "novalue")], agent.clone()).unwrap_err();
        assert!(matches!(e, ConfigError::BadHeaders { entry: 1, .. }));
        let e = resolve(
            &[(env::ENDPOINT, "collector:4317")],
            AgentOtlpOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::BadEndpoint { .. }), "{e}");
    }

    #[test]
    fn errors_never_show_header_values() {
        let headers = "authorization=Bearer%20s3cr3t,x-scope-orgid";
        let e = resolve(
            &[(env::ENDPOINT, "http://h:1"), (env::HEADERS, headers)],
            AgentOtlpOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS: entry 2"), "{e}");
        assert!(!e.contains("s3cr3t") && !e.contains("orgid"), "{e}");
    }

    #[test]
    fn echoed_values_are_short_and_inert() {
        assert_eq!(echo("zstd"), "zstd");
        assert_eq!(
            echo("a\x1b[31m\r\u{9b}\u{202e}b"),
            "a\\x1b[31m\\r\\u{9b}\\u{202e}b"
        );
        let long = "x".repeat(10_000);
        assert_eq!(echo(&long), format!("{}…", "x".repeat(ECHO_CHARS)));
        let e = resolve(
            &[(env::ENDPOINT, &format!("\x1b]0;{long}"))],
            AgentOtlpOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.len() < 200 && !e.contains('\x1b'), "{e}");
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT \"\\x1b]0;xxx"),
            "{e}"
        );
    }

    #[test]
    fn sizes_read_as_written() {
        assert_eq!(format_size(64 << 10), "64 KiB");
        assert_eq!(format_size(16 << 20), "16 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(1000), "1000 bytes");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(u64::MAX), "16 EiB");
    }

    #[test]
    fn the_start_line_shows_the_queue_and_no_credentials() {
        let mut c = resolve(
            &[(env::ENDPOINT, "https://user:pa55@collector:4318/base")],
            AgentOtlpOptions::default(),
        )
        .unwrap()
        .unwrap();
        c.queue_bytes = 64 << 10;
        let d = describe(&c);
        assert_eq!(
            d,
            "https://***@collector:4318/base/v1development/profiles (http/protobuf, gzip, queue 64 KiB)"
        );
        assert_eq!(without_userinfo("http://h:1/a@b"), "http://h:1/a@b");
    }
}
