//! `otelprof top --trend GLOB` on the profiles of a real JVM whose cost moves halfway: the
//! workload tests/java/otelprof/tests/SwitchHalfway.java runs `render` for 1 of 3 units of a
//! request in its first half and 4 of 6 in its second (33 % to 67 % of the CPU), at the same
//! load. The trend must show the step where it happened, bucket by bucket, with the total
//! (render calls the shared `unit`, so its self stays near zero) and without a bucket at the
//! switch breaking the two levels.

use otelprof_tests::{jdk17, otelprof, JvmRun};

const MAIN: &str = "otelprof.tests.SwitchHalfway";
const RENDER: &str = "otelprof.tests.SwitchHalfway.render";
const SECONDS: i64 = 12;
const BUCKETS: usize = 12;

/// One printed row of the trend: where its bucket starts (Unix ms), total% and self%.
#[derive(Debug)]
struct Row {
    start_ms: i64,
    total_pct: f64,
    self_pct: f64,
}

/// Unix ms of an RFC 3339 UTC time with milliseconds, as the table prints it.
fn unix_ms(text: &str) -> i64 {
    let (date, clock) = text.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, ms) = clock.split_once('.').unwrap();
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    ((days * 24 + t[0]) * 60 + t[1]) * 60_000 + t[2] * 1000 + ms.parse::<i64>().unwrap()
}

fn percent(cell: &str) -> f64 {
    cell.trim_end_matches('%').parse().unwrap()
}

/// The table's rows; buckets without data (`-`) are left out.
fn rows(out: &str) -> Vec<Row> {
    let mut lines = out.lines();
    let heading = lines.next().unwrap();
    assert!(heading.starts_with("Trend of"), "{out}");
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["start", "total", "total%", "self", "self%", "total%", "bar"],
        "{out}"
    );
    lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.get(2) != Some(&"-"))
        .map(|cells| Row {
            start_ms: unix_ms(cells[0]),
            total_pct: percent(cells[2]),
            self_pct: percent(cells[4]),
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn a_cost_that_moves_halfway_shows_as_a_step_in_the_trend() {
    let run = JvmRun::new(jdk17(), MAIN)
        .args(&["2", &SECONDS.to_string()])
        .agent("period=1s,cpu=2ms")
        .flags(&[
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,otelprof/tests/SwitchHalfway.*",
        ])
        .run();
    run.assert_clean_exit();
    let printed = |key: &str| -> i64 {
        run.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{key}` line:\n{}", run.stdout))
    };
    let switch = printed("switch ");
    let dir = run.out_dir.to_str().unwrap();
    let buckets = BUCKETS.to_string();
    let args = ["top", "--trend", RENDER, "--buckets", &buckets, dir];
    let (code, out, err) = otelprof(&args);
    println!("$ otelprof {}\n{out}{err}", args.join(" "));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains(&format!("1 function ({RENDER})")),
        "{out}"
    );
    let rows = rows(&out);
    assert!(
        rows.len() >= BUCKETS - 2 && out.lines().count() == BUCKETS + 2,
        "{BUCKETS} buckets asked for:\n{out}"
    );
    // Buckets wholly before or after the switch, a bucket's length away from it (the
    // profiles are a second long and are parted among the buckets they straddle).
    let step = rows[1].start_ms - rows[0].start_ms;
    let before: Vec<f64> = rows
        .iter()
        .skip(1) // the JVM's start (JIT compiler threads) dilutes the first
        .filter(|r| r.start_ms + 2 * step <= switch)
        .map(|r| r.total_pct)
        .collect();
    let after: Vec<f64> = rows
        .iter()
        .filter(|r| r.start_ms >= switch + step)
        .map(|r| r.total_pct)
        .collect();
    assert!(
        before.len() >= 3 && after.len() >= 3,
        "{before:?} {after:?}\n{out}"
    );
    for s in &before {
        assert!((20.0..=45.0).contains(s), "before the switch: {s}%\n{out}");
    }
    for s in &after {
        assert!((55.0..=78.0).contains(s), "after the switch: {s}%\n{out}");
    }
    assert!(
        mean(&after) - mean(&before) >= 25.0,
        "{before:?} → {after:?}\n{out}"
    );
    // render's own code is a loop calling `unit`: total, not self.
    assert!(rows.iter().all(|r| r.self_pct < 5.0), "{out}");
    // A pattern that matches nothing says so and fails.
    let (code, _, err) = otelprof(&["top", "--trend", "*.NoSuchMethod", dir]);
    assert_ne!(code, 0);
    assert!(err.contains("no function matches"), "{err}");
}
