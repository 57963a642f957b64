//! Where the agent's OpAMP client connects and how often it polls: the agent option
//! `opamp=URL` (which wins) or `OTELPROF_OPAMP_ENDPOINT`, the headers of
//! `OTELPROF_OPAMP_HEADERS` (`key=value,…`, percent-encoded, like
//! `OTEL_EXPORTER_OTLP_HEADERS`; `Authorization=Bearer%20<token>` for a serve with `--token`),
//! and the poll interval of `opamp_interval=` or `OTELPROF_OPAMP_INTERVAL`.

use std::path::PathBuf;
use std::time::Duration;

use otelprof_agent_options::{MAX_OPAMP_INTERVAL, MIN_OPAMP_INTERVAL};
use otelprof_exporter::config::ConfigError;

pub mod env {
    pub const ENDPOINT: &str = "OTELPROF_OPAMP_ENDPOINT";
    pub const HEADERS: &str = "OTELPROF_OPAMP_HEADERS";
    pub const INTERVAL: &str = "OTELPROF_OPAMP_INTERVAL";
    /// PEM file of CA certificates to trust for an https server.
    pub const CERTIFICATE: &str = "OTELPROF_OPAMP_CERTIFICATE";
}

/// How often the agent polls when it has nothing to say: often enough that a capture clicked
/// in the UI starts within seconds, at a cost of one small request. (The spec's default is
/// 30 s; the interval is the client's to choose.)
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpampConfig {
    /// The full URL, path included (`http://127.0.0.1:4040/v1/opamp`).
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub interval: Duration,
    pub certificate: Option<PathBuf>,
}

impl OpampConfig {
    /// The client's configuration, or `None` when no endpoint is given (no OpAMP). `option`
    /// and `interval` are the agent options `opamp=` and `opamp_interval=`.
    pub fn resolve(
        lookup: impl Fn(&str) -> Option<String>,
        option: Option<&str>,
        interval: Option<Duration>,
    ) -> Result<Option<OpampConfig>, ConfigError> {
        let endpoint = match option
            .map(str::to_owned)
            .or_else(|| lookup(env::ENDPOINT).filter(|v| !v.trim().is_empty()))
        {
            Some(e) => e.trim().to_owned(),
            None => return Ok(None),
        };
        let rest = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
            return Err(ConfigError::BadEndpoint {
                what: "the OpAMP endpoint",
                value: endpoint,
            });
        }
        let headers = match lookup(env::HEADERS) {
            Some(raw) => otelprof_exporter::config::parse_key_values(&raw).map_err(|entry| {
                ConfigError::BadHeaders {
                    var: env::HEADERS,
                    entry,
                }
            })?,
            None => Vec::new(),
        };
        let interval = match (interval, lookup(env::INTERVAL)) {
            (Some(i), _) => i,
            (None, Some(text)) => otelprof_primitives::units::parse_duration(&text)
                .ok()
                // The bounds of the agent option `opamp_interval`.
                .filter(|d| (MIN_OPAMP_INTERVAL..=MAX_OPAMP_INTERVAL).contains(d))
                .ok_or(ConfigError::BadInterval {
                    var: env::INTERVAL,
                    value: text,
                })?,
            (None, None) => DEFAULT_INTERVAL,
        };
        Ok(Some(OpampConfig {
            endpoint,
            headers,
            interval,
            certificate: lookup(env::CERTIFICATE).map(PathBuf::from),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(
        vars: &[(&str, &str)],
        option: Option<&str>,
    ) -> Result<Option<OpampConfig>, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OpampConfig::resolve(|k| map.get(k).cloned(), option, None)
    }

    #[test]
    fn the_option_wins_and_nothing_means_off() {
        assert_eq!(resolve(&[], None).unwrap(), None);
        let c = resolve(
            &[
                (env::ENDPOINT, "http://env:4040/v1/opamp"),
                (env::HEADERS, "Authorization=Bearer%20t0k"),
                (env::INTERVAL, "2s"),
            ],
            Some("http://option:4040/v1/opamp"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint, "http://option:4040/v1/opamp");
        assert_eq!(c.headers, [("Authorization".into(), "Bearer t0k".into())]);
        assert_eq!(c.interval, Duration::from_secs(2));
        let c = resolve(&[(env::ENDPOINT, "https://e/v1/opamp")], None)
            .unwrap()
            .unwrap();
        assert_eq!(c.interval, DEFAULT_INTERVAL);
    }

    #[test]
    fn bad_values_are_errors_that_show_no_secret() {
        assert!(resolve(&[], Some("ftp://x")).is_err());
        let e = resolve(
            &[(env::ENDPOINT, "http://e"), (env::HEADERS, "ok=1,hunter2")],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("entry 2") && !e.contains("hunter2"), "{e}");
        assert!(resolve(&[(env::ENDPOINT, "http://e"), (env::INTERVAL, "1ms")], None).is_err());
    }
}
