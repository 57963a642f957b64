//! `backend=NAME` (or the variable [`ENV`]): a preset of the other options for one backend.
//! A preset sets defaults, which options given beside it override, and refuses values that
//! would take the export outside what the backend accepts; what it does to the encoding
//! itself (which sample attributes, stack depth, profile size) is the exporter's side
//! (`otel_bridge::otlp::pyroscope`).

use std::time::Duration;

use crate::Value;

/// The variable naming a preset when the options do not (`backend=` wins).
pub const ENV: &str = "OTELPROF_BACKEND";

/// One backend's preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// `(key, value)` set unless the options give the key.
    pub defaults: &'static [(&'static str, &'static str)],
    /// The longest `period`, and why.
    pub max_period: Option<(Duration, &'static str)>,
    /// `(key, value, why)`: values refused with this preset.
    pub refused: &'static [(&'static str, &'static str, &'static str)],
}

/// Grafana Pyroscope (>= 1.20).
///
/// - `links=local_root`: Grafana's "Profiles for this span" asks Pyroscope for the samples
///   whose span id is the span attribute `pyroscope.profile.id`, which the Java shim sets on
///   each local root span; every sample of a request must name that root.
/// - `link_trace_id=off`: Pyroscope 1.20 to 2.0 make a link's trace id a series label, one
///   series per trace (fixed in 2.1); without it they keep the span id alone, which is all
///   the span query needs. Safe on every version.
/// - `period=15s`, at most 30 s: a profile is stamped with the start of its period, and
///   Grafana looks for a span's profiles stamped within 30 s of it (the span's embedded flame
///   graph; its link, 60 s), so a request late in a longer period would be missed.
///   Pyroscope's own Java agent sends every 10 s.
/// - No `thread_id=on`: every sample attribute is a series label in Pyroscope.
pub const PYROSCOPE: Preset = Preset {
    name: "pyroscope",
    defaults: &[
        ("links", "local_root"),
        ("link_trace_id", "off"),
        ("period", "15s"),
    ],
    max_period: Some((
        Duration::from_secs(30),
        "Grafana looks for a span's profiles within 30 s of it, and a profile is stamped with the start of its period",
    )),
    refused: &[(
        "thread_id",
        "on",
        "Pyroscope makes every sample attribute a series label, one series per thread",
    )],
};

/// Every preset.
pub const PRESETS: [Preset; 1] = [PYROSCOPE];

/// The preset named `name`; `None` for `none` and unknown names (the options' table has
/// checked the name already).
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    /// Why `key`, checked as `value` (given as `text`), cannot go with this preset, if so.
    pub fn refuses(&self, key: &str, text: &str, value: &Value<'_>) -> Option<String> {
        if let (("period", Value::Duration(d)), Some((max, why))) = ((key, value), self.max_period)
        {
            if *d > max {
                return Some(format!(
                    "backend={} takes periods up to {}s: {why}",
                    self.name,
                    max.as_secs()
                ));
            }
        }
        self.refused
            .iter()
            .find(|(k, v, _)| *k == key && *v == text)
            .map(|(_, _, why)| format!("not with backend={}: {why}", self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_item;

    #[test]
    fn every_default_is_a_value_the_table_takes_and_the_preset_allows() {
        for preset in PRESETS {
            for (key, text) in preset.defaults {
                let (_, value) = check_item(key, text).unwrap();
                assert_eq!(preset.refuses(key, text, &value), None, "{key}={text}");
            }
            for (key, text, _) in preset.refused {
                assert!(check_item(key, text).is_ok(), "{key}={text}");
            }
        }
        assert!(find("pyroscope").is_some());
        assert!(find("none").is_none());
    }

    #[test]
    fn the_pyroscope_preset_bounds_the_period_and_refuses_thread_ids() {
        let refused = |key: &str, text: &str| {
            let (_, value) = check_item(key, text).unwrap();
            PYROSCOPE.refuses(key, text, &value)
        };
        assert_eq!(refused("period", "30s"), None);
        let why = refused("period", "31s").unwrap();
        assert!(why.contains("up to 30s"), "{why}");
        assert!(refused("thread_id", "on").is_some());
        assert_eq!(refused("thread_id", "off"), None);
        assert_eq!(refused("links", "span"), None);
    }
}
