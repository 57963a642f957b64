use super::*;

/// Whether the agent, and `otelprof attach` before it, take `options`: both read them item by
/// item through `items` and `check_item`.
fn accepted(options: &str) -> bool {
    items(options).all(|item| item.is_ok_and(|(k, v)| check_item(k, v).is_ok()))
}

#[test]
fn one_verdict_for_the_agent_and_attach() {
    for (options, verdict) in [
        ("cpu=100us", true),
        ("cpu=99us", false),
        ("cpu=off", true),
        ("cpu=10", false),
        ("cpu=-1ms", false),
        ("cpu=", false),
        ("cpu", false),
        ("wall=1ms", true),
        ("wall=999us", false),
        ("wall=off", true),
        ("wall_threads=1", true),
        ("wall_threads=1024", true),
        ("wall_threads=0", false),
        ("wall_threads=1025", false),
        ("wall_threads=x", false),
        ("alloc=512k", true),
        ("alloc=2047m", true),
        ("alloc=2g", false),
        ("alloc=off", true),
        ("alloc=12q", false),
        ("live=512k", true),
        ("live=1k", true),
        ("live=1023", false),
        ("live=0", false),
        ("live=off", true),
        ("live=2g", false),
        ("alloc_rate=0", true),
        ("alloc_rate=1000000", true),
        ("alloc_rate=1000001", false),
        ("lock=0", true),
        ("lock=off", true),
        ("lock=10ms", true),
        ("lock=10", false),
        ("clock=cpu", true),
        ("clock=itimer", true),
        ("clock=perf", true),
        ("clock=auto", true),
        ("clock=wall", false),
        ("depth=1", true),
        ("depth=8192", true),
        ("depth=0", false),
        ("depth=8193", false),
        ("period=1s", true),
        ("period=999ms", false),
        ("log=quiet", true),
        ("log=debug", true),
        ("log=loud", false),
        ("endpoint=http://127.0.0.1:1", true),
        ("endpoint=https://h", true),
        ("endpoint=http://", false),
        ("endpoint=ftp://h", false),
        ("protocol=grpc", true),
        ("protocol=http/protobuf", true),
        ("protocol=http/json", false),
        ("service=shop", true),
        ("timestamps=on", true),
        ("timestamps=yes", false),
        ("thread_id=off", true),
        ("thread_id=1", false),
        ("links=span", true),
        ("links=local_root", true),
        ("links=root", false),
        ("link_trace_id=off", true),
        ("link_trace_id=no", false),
        ("backend=pyroscope", true),
        ("backend=none", true),
        ("backend=tempo", false),
        ("queue=64k", true),
        ("queue=63k", false),
        ("queue=1g", true),
        ("opamp=http://127.0.0.1:4040/v1/opamp", true),
        ("opamp=127.0.0.1:4040", false),
        ("opamp_interval=100ms", true),
        ("opamp_interval=99ms", false),
        ("opamp_interval=2h", false),
        ("unknown=1", false),
        ("cpu=1ms,cpu=1ms", false),
        (" cpu = 5ms ,, ", true),
        ("cpu=1ms,wall=5ms,alloc=1m,lock=5ms,log=quiet", true),
        ("alloc=512k,live=512k", true),
    ] {
        assert_eq!(accepted(options), verdict, "{options:?}");
    }
}

#[test]
fn items_trim_skip_empty_and_catch_the_second_of_a_key() {
    let all: Vec<_> = items(" cpu = 5ms ,, wall ,cpu=1ms").collect();
    assert_eq!(
        all,
        [Ok(("cpu", "5ms")), Ok(("wall", "")), Err(Duplicate("cpu"))]
    );
}

#[test]
fn problems_say_what_the_rule_is() {
    for (key, value, problem) in [
        ("cpu", "1us", "the shortest is 100us"),
        ("cpu", "10", "a duration needs a unit, e.g. 10ms"),
        ("wall", "500us", "the shortest is 1ms"),
        ("period", "500ms", "the shortest is 1s"),
        ("opamp_interval", "2h", "the longest is 1h"),
        ("depth", "0", "expected a whole number from 1 to 8192"),
        ("alloc", "4g", "the largest is 2047m"),
        ("live", "0", "the smallest is 1k"),
        ("queue", "1k", "the smallest is 64k"),
        ("clock", "wall", "expected auto or perf or cpu or itimer"),
        (
            "endpoint",
            "localhost:4317",
            "expected an http:// or https:// URL",
        ),
        ("cpu", "fast", "not a duration (e.g. 10ms, 1.5s, 2m, 1h)"),
    ] {
        assert_eq!(
            check_item(key, value).unwrap_err(),
            Problem::BadValue(problem.to_owned()),
            "{key}={value}"
        );
    }
    assert_eq!(check_item("cpus", "1ms").unwrap_err(), Problem::Unknown);
    assert_eq!(
        check_item("cpu", "").unwrap_err(),
        Problem::MissingValue { example: "10ms" }
    );
    assert_eq!(
        check_item("lock", "0").unwrap().1,
        Value::Duration(Duration::ZERO)
    );
    assert_eq!(check_item("alloc", "off").unwrap().1, Value::Off);
    assert!(known_keys().starts_with("cpu, wall, wall_threads, alloc,"));
}

#[test]
fn a_server_sets_profiling_intervals_only_within_stricter_bounds() {
    let settable: Vec<&str> = OPTIONS
        .iter()
        .filter(|o| o.remote.settable())
        .map(|o| o.key)
        .collect();
    assert_eq!(settable, ["cpu", "wall", "alloc", "live", "lock"]);
    for o in OPTIONS.iter().filter(|o| o.remote.settable()) {
        // Every remote minimum is a value the agent takes locally too.
        let min = o.remote.minimum().unwrap();
        assert!(o.check(&min).is_ok(), "{}={min}", o.key);
    }
    let cpu = find("cpu").unwrap();
    assert_eq!(
        cpu.check_remote("100us").unwrap_err(),
        "cpu=100us is below the shortest interval a server may ask for, 1ms"
    );
    assert_eq!(
        cpu.check_remote("2h").unwrap_err(),
        "cpu=2h is longer than 1h"
    );
    let alloc = find("alloc").unwrap();
    assert_eq!(
        alloc.check_remote("3g").unwrap_err(),
        "alloc=3g: the largest interval is 2047m"
    );
    assert_eq!(alloc.check_remote("16k").unwrap(), Value::Size(16 << 10));
    assert!(find("out")
        .unwrap()
        .check_remote("/tmp")
        .unwrap_err()
        .contains("path"));
}
