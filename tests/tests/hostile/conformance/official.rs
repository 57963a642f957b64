//! The official parser's verdicts (tests/python/otlp_verdicts.py, one process for all cases)
//! and the comparison of otelprof's model with what the official classes read.

use otelprof_tests::Tied as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use opentelemetry::{KeyValue, Value};
use otel_bridge::{Link, Profile, StackId};
use otelprof_tests::{python, repo_root};
use serde_json::Value as Json;

/// The official parser's verdict on each case, in order: `{"ok": false, "error": …}` or
/// `{"ok": true, "summary": …}` (what it read, for [`compare`]).
pub fn official_verdicts(dir: &Path, cases: &[Vec<u8>]) -> Vec<Json> {
    let input = dir.join("cases.bin");
    let output = dir.join("verdicts.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for bytes in cases {
        f.write_all(&(bytes.len() as u32).to_le_bytes()).unwrap();
        f.write_all(bytes).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let out = Command::new(python())
        .arg(repo_root().join("tests/python/otlp_verdicts.py"))
        .arg(&input)
        .arg(&output)
        .output_tied()
        .unwrap();
    assert!(
        out.status.success(),
        "otlp_verdicts.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&output).unwrap();
    let verdicts: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), cases.len(), "one verdict per case");
    verdicts
}

fn int(v: &Json) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn ints(v: &Json) -> Vec<i128> {
    v.as_array().unwrap().iter().map(int).collect()
}

/// An unsigned 64-bit protobuf value as the model keeps it (saturated to i64).
fn saturated(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::String(s) => serde_json::json!(["s", s.as_str()]),
        Value::Bool(b) => serde_json::json!(["b", b]),
        Value::I64(n) => serde_json::json!(["i", n]),
        Value::F64(f) => serde_json::json!(["d", f.to_bits()]),
        other => serde_json::json!(["?", format!("{other:?}")]),
    }
}

/// Where the model `decoded` differs from the official classes' reading `summary`.
pub fn compare(summary: &Json, decoded: &[(Vec<KeyValue>, Profile)]) -> Result<(), String> {
    let profiles = summary["profiles"].as_array().unwrap();
    if profiles.len() != decoded.len() {
        return Err(format!(
            "{} profiles, the official parser read {}",
            decoded.len(),
            profiles.len()
        ));
    }
    let Some((_, first)) = decoded.first() else {
        return Ok(());
    };
    let dict = &first.dictionary;
    let strings: Vec<&str> = summary["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    // The model's strings are the request's, then a few it added (renamed label keys).
    let ours: Vec<&str> = dict.strings.iter().map(String::as_str).collect();
    if !ours.starts_with(&strings) {
        return Err(format!(
            "string table {:?}…, the official parser read {:?}…",
            &ours[..ours.len().min(8)],
            &strings[..strings.len().min(8)]
        ));
    }
    let functions = summary["functions"].as_array().unwrap();
    let ours: Vec<[i128; 4]> = dict
        .functions
        .iter()
        .map(|f| {
            [
                i128::from(f.name.0),
                i128::from(f.system_name.0),
                i128::from(f.filename.0),
                i128::from(f.start_line),
            ]
        })
        .collect();
    let theirs: Vec<[i128; 4]> = functions
        .iter()
        .map(|f| {
            let v = ints(f);
            [v[0], v[1], v[2], v[3]]
        })
        .collect();
    if ours != theirs && !(theirs.is_empty() && ours == [[0; 4]]) {
        return Err(format!(
            "functions {ours:?}, the official parser read {theirs:?}"
        ));
    }
    let locations = summary["locations"].as_array().unwrap();
    let ours: Vec<(i128, Vec<(i128, i128)>)> = dict
        .locations
        .iter()
        .map(|l| {
            (
                i128::from(l.address),
                l.lines
                    .iter()
                    .map(|ln| (i128::from(ln.function.0), i128::from(ln.line)))
                    .collect(),
            )
        })
        .collect();
    let theirs: Vec<(i128, Vec<(i128, i128)>)> = locations
        .iter()
        .map(|l| {
            let lines = l[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|ln| (int(&ln[0]), int(&ln[1])))
                .collect();
            (int(&l[0]), lines)
        })
        .collect();
    if ours != theirs && !(theirs.is_empty() && ours.len() == 1) {
        return Err(format!(
            "locations {ours:?}, the official parser read {theirs:?}"
        ));
    }
    let stacks = summary["stacks"].as_array().unwrap();
    if dict.stacks.len() != stacks.len().max(1) {
        return Err(format!(
            "{} stacks, the official parser read {}",
            dict.stacks.len(),
            stacks.len()
        ));
    }
    for (i, s) in stacks.iter().enumerate() {
        let ours: Vec<i128> = dict
            .stacks
            .get(StackId(i as u32))
            .iter()
            .map(|l| i128::from(l.0))
            .collect();
        if ours != ints(s) {
            return Err(format!(
                "stack {i} is {ours:?}, the official parser read {s}"
            ));
        }
    }
    let links = summary["links"].as_array().unwrap();
    for (n, ((resource, p), theirs)) in decoded.iter().zip(profiles).enumerate() {
        let ours: Vec<Json> = resource
            .iter()
            .map(|kv| serde_json::json!([kv.key.as_str(), value_json(&kv.value)]))
            .collect();
        if Json::from(ours.clone()) != theirs["resource"] {
            return Err(format!(
                "profile {n}: resource {ours:?}, the official parser read {}",
                theirs["resource"]
            ));
        }
        let vt = |v: &Json| (int(&v[0]), int(&v[1]));
        let st = p.sample_types[0];
        if theirs["sample_type"].is_null()
            || (i128::from(st.ty.0), i128::from(st.unit.0)) != vt(&theirs["sample_type"])
        {
            return Err(format!(
                "profile {n}: sample type {st:?}, the official parser read {}",
                theirs["sample_type"]
            ));
        }
        let pt = p.period_type;
        if (i128::from(pt.ty.0), i128::from(pt.unit.0)) != vt(&theirs["period_type"]) {
            return Err(format!(
                "profile {n}: period type {pt:?}, the official parser read {}",
                theirs["period_type"]
            ));
        }
        let numbers = (p.period, p.time_nanos, p.duration_nanos);
        let official = (
            saturated(int(&theirs["period"])),
            saturated(int(&theirs["time"])),
            saturated(int(&theirs["duration"])),
        );
        if numbers != official {
            return Err(format!(
                "profile {n}: period, time, duration {numbers:?}, the official parser read {official:?}"
            ));
        }
        let samples = theirs["samples"].as_array().unwrap();
        if samples.len() != p.samples.len() {
            return Err(format!(
                "profile {n}: {} samples, the official parser read {}",
                p.samples.len(),
                samples.len()
            ));
        }
        for (k, (s, t)) in p.samples.iter().zip(samples).enumerate() {
            let values = ints(&t[1]);
            let timestamps: Vec<i64> = ints(&t[2]).into_iter().map(saturated).collect();
            let value = if values.is_empty() {
                timestamps.len() as i64
            } else {
                values.iter().fold(0i64, |a, v| a.saturating_add(*v as i64))
            };
            let link_index = int(&t[3]);
            let link = if link_index == 0 {
                None
            } else {
                let l = &links[link_index as usize];
                let (trace, span) = (l[0].as_str().unwrap(), l[1].as_str().unwrap());
                // A span id alone reads as a span of an all-zero trace id.
                match (trace.len(), span.len()) {
                    (0, 16) => Link::from_hex(&"0".repeat(32), span),
                    (0, _) => None,
                    _ => Some(Link::from_hex(trace, span).unwrap()),
                }
            };
            let ours = (i128::from(s.stack.0), s.values[0], &s.timestamps, s.link);
            let official = (int(&t[0]), value, &timestamps, link);
            if ours != official {
                return Err(format!(
                    "profile {n} sample {k}: (stack, value, timestamps, link) {ours:?}, the \
                     official parser read {official:?}"
                ));
            }
        }
    }
    Ok(())
}
