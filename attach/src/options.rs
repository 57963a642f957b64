//! `otelprof attach PID start OPTIONS`: the agent options checked here, before the JVM is
//! touched, against the table the agent itself parses them with (`otelprof_agent_options`:
//! the same keys, the same grammar of durations and sizes, the same bounds), so a typo is
//! one clear line and not a library loaded for nothing.
//!
//! Two things only the CLI can do: `reply=` and `file=` are the CLI's to set (refused here),
//! and `out=` is a path on the JVM's side. A relative `out=` is made absolute against our
//! working directory when the JVM sees the same files as we do; otherwise it is refused (our
//! working directory means nothing to the JVM) and an absolute one is checked inside the
//! JVM's root.

use otelprof_agent_options::{check_item, items, known_keys, Kind, Problem};

use otelprof_primitives::escape;

/// Keys the CLI adds itself.
const RESERVED: [&str; 2] = ["reply", "file"];

/// Checks `options` (`key=value,...`) and returns them as the agent is to get them: items
/// trimmed, empty ones dropped, `out=` resolved by `resolve_out` (which returns the path
/// the JVM is to use, or why it cannot).
pub fn check(
    options: &str,
    resolve_out: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = Vec::new();
    for item in items(options) {
        let (key, value) = match item {
            Ok(kv) => kv,
            Err(d) => {
                return Err(format!(
                    "agent option {} is given twice",
                    escape::quote(d.0)
                ))
            }
        };
        let shown = escape::quote(key);
        if RESERVED.contains(&key) {
            return Err(format!(
                "option {shown} is set by otelprof attach itself (dump -o FILE writes a file)"
            ));
        }
        let option = match check_item(key, value) {
            Ok((option, _)) => option,
            Err(Problem::Unknown) => {
                return Err(format!(
                    "unknown agent option {shown} (known: {})",
                    known_keys()
                ))
            }
            Err(Problem::MissingValue { example }) => {
                return Err(format!(
                    "agent option {shown} needs a value, as in {key}={example}"
                ))
            }
            Err(Problem::BadValue(reason)) => {
                return Err(format!(
                    "agent option {}: {reason}",
                    escape::quote(&format!("{key}={value}"))
                ))
            }
        };
        if option.kind == Kind::Dir {
            out.push(format!("out={}", out_dir(value, &resolve_out)?));
        } else {
            out.push(format!("{key}={value}"));
        }
    }
    Ok(out.join(","))
}

/// The directory the JVM is to write to, resolved on its side.
fn out_dir(
    value: &str,
    resolve_out: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let dir = resolve_out(value)
        .map_err(|reason| format!("agent option out={}: {reason}", escape::quote(value)))?;
    if dir.contains(',') {
        return Err(format!(
            "agent option out={}: the directory's path holds a comma, which the \
             agent's option syntax cannot carry",
            escape::quote(&dir)
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_out(_: &str) -> Result<String, String> {
        Err("unexpected".into())
    }

    #[test]
    fn good_options_come_back_normalised() {
        assert_eq!(check("", no_out).unwrap(), "");
        assert_eq!(
            check(
                " cpu=1ms , wall=off,,alloc=512k,lock=0,clock=itimer,depth=64,period=10s,\
                   log=debug,endpoint=http://127.0.0.1:4317,protocol=grpc,service=shop,\
                   timestamps=on,thread_id=off,queue=64k,wall_threads=1024,alloc_rate=0",
                no_out
            )
            .unwrap(),
            "cpu=1ms,wall=off,alloc=512k,lock=0,clock=itimer,depth=64,period=10s,log=debug,\
             endpoint=http://127.0.0.1:4317,protocol=grpc,service=shop,timestamps=on,\
             thread_id=off,queue=64k,wall_threads=1024,alloc_rate=0"
        );
    }

    #[test]
    fn out_goes_through_the_resolver() {
        let abs = |v: &str| Ok(format!("/srv/app/{v}"));
        assert_eq!(
            check("out=p,cpu=5ms", abs).unwrap(),
            "out=/srv/app/p,cpu=5ms"
        );
        let refuse = |_: &str| Err("relative".to_owned());
        assert_eq!(
            check("out=p", refuse).unwrap_err(),
            "agent option out=\"p\": relative"
        );
        let comma = |_: &str| Ok("/a,b".to_owned());
        assert!(check("out=x", comma).unwrap_err().contains("comma"));
    }

    #[test]
    fn each_mistake_is_named() {
        for (options, message) in [
            ("cpu=1us", "agent option \"cpu=1us\": the shortest is 100us"),
            (
                "cpu=10",
                "agent option \"cpu=10\": a duration needs a unit, e.g. 10ms",
            ),
            (
                "wall=500us",
                "agent option \"wall=500us\": the shortest is 1ms",
            ),
            (
                "period=500ms",
                "agent option \"period=500ms\": the shortest is 1s",
            ),
            (
                "depth=0",
                "agent option \"depth=0\": expected a whole number from 1 to 8192",
            ),
            (
                "alloc=4g",
                "agent option \"alloc=4g\": the largest is 2047m",
            ),
            ("queue=1k", "agent option \"queue=1k\": the smallest is 64k"),
            (
                "clock=wall",
                "agent option \"clock=wall\": expected cpu or itimer",
            ),
            (
                "endpoint=localhost:4317",
                "agent option \"endpoint=localhost:4317\": expected an http:// or https:// URL",
            ),
            ("cpu", "agent option \"cpu\" needs a value, as in cpu=10ms"),
            ("cpu=1ms,cpu=2ms", "agent option \"cpu\" is given twice"),
            (
                "reply=/etc/passwd",
                "option \"reply\" is set by otelprof attach itself (dump -o FILE writes a file)",
            ),
            (
                "file=/x",
                "option \"file\" is set by otelprof attach itself (dump -o FILE writes a file)",
            ),
        ] {
            assert_eq!(check(options, no_out).unwrap_err(), message, "{options}");
        }
        let unknown = check("cpus=10ms", no_out).unwrap_err();
        assert!(
            unknown.starts_with("unknown agent option \"cpus\" (known: cpu, wall,"),
            "{unknown}"
        );
        // Control characters in what is quoted back are escaped.
        assert!(check("\x1b[2J=1", no_out).unwrap_err().contains("\\x1b[2J"));
    }
}
