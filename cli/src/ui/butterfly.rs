//! The butterfly view's answer (`/api/butterfly?function=GLOB&<selection>`): `otelprof
//! callers GLOB` and `otelprof callees GLOB` over one merge of the selection, the trees as
//! the CLI prints them ([`commands::butterfly::trees`]: same depth, same `--min` cut, same
//! shares), serialised.

use std::path::Path;

use serde_json::{json, Value};

use otelprof_store::query::butterfly::Direction;

use super::api::header;
use super::params::{self, Params};
use crate::cli::Cmd;
use crate::commands::{self, butterfly::Branch};

fn branch_json(b: &Branch) -> Value {
    json!({
        "name": b.name,
        "value": b.value,
        "share": b.share,
        "children": b.children.iter().map(branch_json).collect::<Vec<_>>(),
        "left_out": (b.left_out.0 > 0).then(|| json!({"count": b.left_out.0, "share": b.left_out.1})),
    })
}

/// Both halves for the functions `function` names in the selection `p` describes: each
/// matching function, largest first, with its share of everything selected and the paths
/// into it (`callers`) or below it (`callees`), each with its share of the function's total.
pub fn answer(store: &Path, p: &Params) -> Result<String, String> {
    if p.get("function").is_none() {
        return Err("name a function: function=pkg.Class.method (`*` for any run)".to_owned());
    }
    let Cmd::Callers(args) = params::command("callers", p, store)? else {
        return Err("not a callers query".into());
    };
    let text = |e: anyhow::Error| format!("{e:#}");
    let glob = commands::butterfly::glob(&args).map_err(text)?;
    let selector = args.select.selector().map_err(text)?;
    let (merged, ty) =
        commands::merge_selection(&args.paths, &args.select, &selector, None).map_err(text)?;
    let half = |direction| {
        commands::butterfly::trees(&merged, ty, &glob, direction, &args)
            .map(|(functions, _)| functions.iter().map(branch_json).collect::<Vec<_>>())
            .map_err(text)
    };
    Ok(json!({
        "type": ty.name(),
        "function": args.function,
        "header": header(&merged),
        "depth": args.depth,
        "min": args.min,
        "callers": half(Direction::Callers)?,
        "callees": half(Direction::Callees)?,
    })
    .to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use otelprof_store::merge::{Merged, MergedStack};

    /// A CPU profile on disk (pprof, as the UI's export writes it): frames 0 main, 1 handle,
    /// 2 find, 3 hash, 4 other, 5 log.
    fn profile_file(name: &str) -> std::path::PathBuf {
        let frames = [
            "app.Main.main",
            "app.Web.handle",
            "app.Catalog.find",
            "util.Hash.hash",
            "app.Web.other",
            "app.Log.write",
        ];
        let stack = |f: &[u32], v: f64| MergedStack {
            group: 0,
            frames: f.to_vec(),
            value: v,
            count: 1.0,
        };
        let merged = Merged {
            sample_type: "cpu".to_owned(),
            unit: "nanoseconds".to_owned(),
            frames: frames.iter().map(|s| (*s).to_owned()).collect(),
            files: vec![String::new(); frames.len()],
            groups: vec![String::new()],
            stacks: vec![
                stack(&[0, 1, 2, 3], 60e6),
                stack(&[0, 4, 2], 30e6),
                stack(&[0, 4, 2, 5], 10e6),
                stack(&[0, 4], 100e6),
            ],
            window: Some((1_700_000_000_000_000_000, 1_700_000_010_000_000_000)),
            ..Merged::default()
        };
        let dir = std::env::temp_dir().join(format!(
            "otelprof-ui-butterfly-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cpu.pb.gz");
        std::fs::write(&path, super::super::export::pprof(&merged)).unwrap();
        path
    }

    fn get(store: &Path, query: &str) -> Result<Value, String> {
        answer(store, &Params::parse(query)).map(|t| serde_json::from_str(&t).unwrap())
    }

    fn rows(v: &Value) -> Vec<(String, f64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let share = (b["share"].as_f64().unwrap() * 100.0).round() / 100.0;
                (b["name"].as_str().unwrap().to_owned(), share)
            })
            .collect()
    }

    #[test]
    fn both_halves_with_the_shares_of_the_functions_total() {
        let file = profile_file("halves");
        let v = get(&file, "function=*.find").unwrap();
        assert_eq!(v["type"], "cpu");
        assert_eq!(v["header"]["total"].as_f64().unwrap(), 200e6);
        let callers = &v["callers"];
        // One function, half of everything selected.
        assert_eq!(rows(callers), [("app.Catalog.find".to_owned(), 50.0)]);
        assert_eq!(
            rows(&callers[0]["children"]),
            [
                ("app.Web.handle".to_owned(), 60.0),
                ("app.Web.other".to_owned(), 40.0)
            ]
        );
        assert_eq!(
            rows(&callers[0]["children"][0]["children"]),
            [("app.Main.main".to_owned(), 60.0)]
        );
        let callees = &v["callees"][0];
        assert_eq!(
            rows(&callees["children"]),
            [
                ("util.Hash.hash".to_owned(), 60.0),
                ("app.Log.write".to_owned(), 10.0)
            ]
        );
        assert!(callees["left_out"].is_null());
        // --min leaves paths out and says how much; --depth cuts levels.
        let v = get(&file, "function=*.find&min=20&depth=1").unwrap();
        let callees = &v["callees"][0];
        assert_eq!(
            rows(&callees["children"]),
            [("util.Hash.hash".to_owned(), 60.0)]
        );
        assert_eq!(callees["left_out"]["count"], 1);
        assert!(v["callers"][0]["children"][0]["children"]
            .as_array()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn focus_and_errors_are_the_clis() {
        let file = profile_file("focus");
        // --exclude drops the stacks through the logger: the function's total shrinks.
        let v = get(&file, "function=app.Catalog.find&exclude=*.Log.*").unwrap();
        assert_eq!(v["header"]["total"].as_f64().unwrap(), 190e6);
        assert_eq!(
            rows(&v["callees"][0]["children"]),
            [("util.Hash.hash".to_owned(), 66.67)]
        );
        // --hide removes the callers' frame: the paths go straight to main.
        let v = get(&file, "function=app.Catalog.find&hide=app.Web.*").unwrap();
        assert_eq!(
            rows(&v["callers"][0]["children"]),
            [("app.Main.main".to_owned(), 100.0)]
        );
        let err = get(&file, "function=no.Such.method").unwrap_err();
        assert!(err.contains("no function matches"), "{err}");
        let err = get(&file, "function=*.find&include=+").unwrap_err();
        assert_eq!(err, "--include \" \": an empty pattern");
        let err = get(&file, "where=a%3Db").unwrap_err();
        assert!(err.contains("name a function"), "{err}");
    }
}
