//! Protobuf conformance of otelprof's OTLP decoder, measured against the official parser:
//! thousands of mutated valid requests go to `otlp::check_request` (what the
//! receiver runs on every request) and to Google's protobuf for Python (its upb parser, on the
//! generated classes of PyPI `opentelemetry-proto`, via tests/python/otlp_verdicts.py: one
//! process for all cases), and their verdicts are compared.
//!
//! # The same verdict
//!
//! The official parser judges the protobuf layer only: wire format, UTF-8 in `string` fields,
//! nesting depth. otelprof's decoder judges that and OTLP's rules too (every index in range, id
//! lengths, values matching timestamps, a sample type per profile, `string_table[0] == ""`, the
//! decode [`Limits`](otel_bridge::otlp::Limits)). `DecodeError::layer()` says which layer
//! an error belongs to: `ErrorLayer::Encoding` for `Wire`, `Utf8`, `Protobuf` and `Inflate`
//! (bytes that are not the protobuf encoding of the messages), `ErrorLayer::Otlp` for every
//! other variant. For every case:
//!
//! - (a) the official parser rejects it ⇒ otelprof rejects it (at either layer);
//! - (b) the official parser accepts it ⇒ otelprof accepts it, or rejects it at the OTLP layer;
//!   never with an encoding error;
//! - (c) `otlp::decode` and `otlp::check_request` agree (they are one walk in two modes);
//! - (d) when both accept, the model `otlp::decode` built holds what the official classes read:
//!   the dictionary's strings, functions, locations and stacks, and per profile its resource
//!   attributes, value types, period, times and every sample's stack, value, timestamps and
//!   link (the comparison is in [`compare`]);
//! - (e) the valid requests the cases start from are accepted (a dictionary split in two and two
//!   requests back to back are valid OTLP, not only valid protobuf).
//!
//! Each case that breaks one of these is written to the scratch directory (`case-N.pb`) and
//! named in the failure, with the two verdicts.
//!
//! # The cases
//!
//! The valid requests are encoded by the crate's encoder from realistic profiles (several OTLP
//! profiles per request, links, attributes, timestamps, a resource with an array value), plus
//! variants that protobuf must read the same: the dictionary split over two occurrences of its
//! field, every packed field written unpacked, and two requests concatenated (which merges
//! them). Each case applies one to three mutations, the first chosen round-robin so that every
//! kind is tried equally often: on the parsed message tree (duplicate, remove, move or split a
//! field, wrong wire types with malformed and with well-formed contents, invalid UTF-8 in
//! strings and in bytes, unknown fields of every wire type, groups, over-long varints, tags and
//! lengths, nesting at the depth limit, unpacked fields, out-of-range numbers) and on the
//! encoded bytes (flips, insertions, deletions, truncations, duplicated ranges). The random
//! source is seeded: every run tries the same cases.

mod mutation;
mod official;
mod requests;
mod rng;
mod tree;

use std::collections::BTreeMap;

use otel_bridge::otlp::{self, ErrorLayer};
use otelprof_tests::scratch_dir;

use mutation::{make_case, Mutation, MUTATIONS};
use official::{compare, official_verdicts};
use requests::bases;
use rng::Rng;
use tree::encode;

/// Cases per run: enough for every mutation kind to be tried hundreds of times, in well under
/// a minute (most of it the Python side).
const CASES: usize = 24_000;

/// An OTLP-layer error without its numbers, to count them by kind.
fn reason(e: &otlp::DecodeError) -> String {
    match e {
        otlp::DecodeError::OutOfRange {
            referrer, table, ..
        } => format!("{referrer} refers past the end of {table}"),
        otlp::DecodeError::BadIdLength { what, .. } => {
            format!("a link's {what} has the wrong length")
        }
        otlp::DecodeError::OverLimit { what, .. } => format!("{what} is over its limit"),
        other => {
            let debug = format!("{other:?}");
            debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or_default()
                .to_owned()
        }
    }
}

#[derive(Default)]
struct Tally {
    both_accept: usize,
    both_reject: usize,
    /// The official parser accepts, otelprof rejects at the OTLP layer: allowed.
    otlp_reject: usize,
    /// (a): only otelprof accepts.
    only_ours_accepts: usize,
    /// (b): only the official parser accepts, otelprof says the encoding is wrong.
    only_official_accepts: usize,
    /// (c) and (d).
    decode_differs: usize,
    model_differs: usize,
}

impl Tally {
    fn disagreements(&self) -> usize {
        self.only_ours_accepts
            + self.only_official_accepts
            + self.decode_differs
            + self.model_differs
    }
}

#[test]
fn check_request_agrees_with_the_official_parser() {
    let dir = scratch_dir("conformance");
    let bases = bases();
    let mut rng = Rng::new(0x1505_c0f0);
    let mut cases = Vec::with_capacity(CASES + bases.len());
    let mut what = Vec::with_capacity(CASES + bases.len());
    for (name, base) in &bases {
        cases.push(encode(base));
        what.push((*name, Mutation::Unmutated));
    }
    for i in 0..CASES {
        let (name, base) = &bases[rng.below(bases.len())];
        let first = MUTATIONS[i % MUTATIONS.len()];
        cases.push(make_case(base, first, &mut rng));
        what.push((*name, first));
    }
    let verdicts = official_verdicts(&dir, &cases);

    // The unmutated requests must be valid protobuf, or the test generates nonsense.
    for (n, (name, _)) in bases.iter().enumerate() {
        assert_eq!(verdicts[n]["ok"], true, "{name}: {}", verdicts[n]);
    }

    let mut by_mutation: BTreeMap<Mutation, Tally> = BTreeMap::new();
    // Why otelprof rejected what the official parser accepted: OTLP's rules only.
    let mut otlp_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = Tally::default();
    let mut examples: Vec<String> = Vec::new();
    for (n, (bytes, verdict)) in cases.iter().zip(&verdicts).enumerate() {
        let (base, mutation) = what[n];
        let official_ok = verdict["ok"].as_bool().unwrap();
        let checked = otlp::check_request(bytes);
        let decoded = otlp::decode(bytes);
        let t = by_mutation.entry(mutation).or_default();
        let mut problem = None;
        if decoded.is_ok() != checked.is_ok() {
            t.decode_differs += 1;
            total.decode_differs += 1;
            problem = Some(format!(
                "decode says {:?}, check_request says {:?}",
                decoded.as_ref().err().map(ToString::to_string),
                checked.as_ref().err().map(ToString::to_string)
            ));
        }
        match (official_ok, &checked) {
            (true, Ok(_)) => {
                t.both_accept += 1;
                total.both_accept += 1;
                if let Ok(decoded) = &decoded {
                    if let Err(e) = compare(&verdict["summary"], decoded) {
                        t.model_differs += 1;
                        total.model_differs += 1;
                        problem = Some(format!("both accept, but the model differs: {e}"));
                    }
                }
            }
            (false, Err(_)) => {
                t.both_reject += 1;
                total.both_reject += 1;
            }
            // The unmutated requests are valid OTLP too (a split dictionary or two requests
            // back to back included): those must be accepted.
            (true, Err(e)) if e.layer() == ErrorLayer::Otlp && mutation != Mutation::Unmutated => {
                t.otlp_reject += 1;
                total.otlp_reject += 1;
                *otlp_reasons.entry(reason(e)).or_default() += 1;
            }
            (true, Err(e)) => {
                t.only_official_accepts += 1;
                total.only_official_accepts += 1;
                problem = Some(format!(
                    "the official parser accepts, otelprof says \"{e}\""
                ));
            }
            (false, Ok(_)) => {
                t.only_ours_accepts += 1;
                total.only_ours_accepts += 1;
                problem = Some(format!(
                    "the official parser says \"{}\", otelprof accepts",
                    verdict["error"].as_str().unwrap_or("")
                ));
            }
        }
        if let Some(p) = problem {
            let file = dir.join(format!("case-{n}.pb"));
            std::fs::write(&file, bytes).unwrap();
            if examples.len() < 25 {
                examples.push(format!(
                    "case {n} ({base}, {mutation:?}; {}): {p}",
                    file.display()
                ));
            }
        }
    }
    println!(
        "{} cases from {} valid requests; the official parser accepted {} and rejected {}",
        cases.len(),
        bases.len(),
        total.both_accept + total.otlp_reject + total.only_official_accepts,
        total.both_reject + total.only_ours_accepts
    );
    println!(
        "{:<24} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7}",
        "mutation", "accept", "reject", "otlp", "only ours", "only off.", "decode", "model"
    );
    for (m, t) in &by_mutation {
        println!(
            "{:<24} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7}",
            format!("{m:?}"),
            t.both_accept,
            t.both_reject,
            t.otlp_reject,
            t.only_ours_accepts,
            t.only_official_accepts,
            t.decode_differs,
            t.model_differs
        );
    }
    println!(
        "{:<24} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7}",
        "all",
        total.both_accept,
        total.both_reject,
        total.otlp_reject,
        total.only_ours_accepts,
        total.only_official_accepts,
        total.decode_differs,
        total.model_differs
    );
    println!("(accept: both accept; reject: both reject; otlp: the official parser accepts, otelprof rejects at the OTLP layer; only ours: only otelprof accepts, (a) broken; only off.: only the official parser accepts, (b) broken; decode: (c) broken; model: (d) broken)");
    println!("otelprof's OTLP-layer rejections of what the official parser accepts:");
    for (r, n) in &otlp_reasons {
        println!("{n:>7}  {r}");
    }
    assert!(
        total.disagreements() == 0,
        "{} of {} cases disagree with the official parser (files in {}):\n{}",
        total.disagreements(),
        cases.len(),
        dir.display(),
        examples.join("\n")
    );
    // Every kind of mutation must have made cases the official parser accepts and cases it
    // rejects, or the cases test less than they claim. Exceptions: a byte inserted, deleted or
    // duplicated, or a cut, inside a length-delimited field breaks every enclosing length, so
    // those are (rightly) nearly always rejected; the unmutated requests are all valid.
    for (m, t) in &by_mutation {
        let accepted = t.both_accept + t.otlp_reject + t.only_official_accepts;
        let rejected = t.both_reject + t.only_ours_accepts;
        let always_broken = matches!(
            m,
            Mutation::InsertByte
                | Mutation::DeleteBytes
                | Mutation::Truncate
                | Mutation::DuplicateBytes
        );
        assert!(
            accepted >= 20 || always_broken || *m == Mutation::Unmutated,
            "{m:?}: only {accepted} cases the official parser accepts"
        );
        assert!(
            rejected >= 20 || *m == Mutation::Unmutated,
            "{m:?}: only {rejected} cases the official parser rejects"
        );
    }
}
