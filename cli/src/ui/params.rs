//! The UI's query parameters are the CLI's flags: `?where=service.version%3D1.5&type=cpu` is
//! `--where service.version=1.5 --type cpu`. They are turned into an argument list and parsed
//! by the CLI's own parser ([`crate::cli`]), so a link and a command line mean the same thing
//! and are checked by the same rules.

use std::path::Path;

use clap::Parser as _;

use crate::cli::{Cli, Cmd};

/// Query parameters, decoded, in order (keys may repeat, as flags do).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params(pub Vec<(String, String)>);

/// `application/x-www-form-urlencoded` text: `+` is a space, `%XX` a byte (invalid UTF-8 is
/// replaced, never trusted).
fn decode(text: &str) -> String {
    let spaced = text.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

impl Params {
    pub fn parse(query: &str) -> Params {
        Params(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Flags of the selection every reading command shares.
const SELECT: &[&str] = &[
    "where", "type", "value", "from", "to", "trace_id", "span_id", "lines", "include", "exclude",
    "hide",
];
/// Parameters that are a command's argument, not a flag: `function=GLOB` is the GLOB of
/// `otelprof callers GLOB`. Each is taken once (a second one would be read as a path).
const ARGUMENTS: &[&str] = &["function"];
/// Flags without a value: `lines=1` (or `lines=true`) is `--lines`.
const SWITCHES: &[&str] = &["lines", "children"];
/// Parameters of the UI itself, not flags (what to export, the timeline's resolution, the
/// search box, what the flame graph is coloured by): left for the view to read.
const UI_ONLY: &[&str] = &["format", "side", "buckets", "search", "stack", "color"];

/// The flags each command's view takes beyond [`SELECT`].
fn command_flags(command: &str) -> &'static [&'static str] {
    match command {
        "top" => &["by", "limit", "trend"],
        "callers" | "callees" => &["function", "depth", "min"],
        "traces" => &["limit"],
        "leaks" => &["min_snapshots", "all"],
        "findings" => &["new_against"],
        "drilldown" => &["children", "endpoint", "limit"],
        "diff" => &[
            "base",
            "head",
            "base_from",
            "base_to",
            "head_from",
            "head_to",
            "by",
            "fdr",
            "limit",
        ],
        _ => &[],
    }
}

/// Parses `params` as the flags of `otelprof <command> … -- <store>`; the error names the
/// parameter or says what the CLI says.
pub fn command(command: &str, params: &Params, store: &Path) -> Result<Cmd, String> {
    let extra = command_flags(command);
    let mut argv: Vec<std::ffi::OsString> = vec!["otelprof".into(), command.into()];
    let mut arguments: Vec<&str> = Vec::new();
    for (key, value) in &params.0 {
        if UI_ONLY.contains(&key.as_str()) {
            continue;
        }
        if !SELECT.contains(&key.as_str()) && !extra.contains(&key.as_str()) {
            return Err(format!(
                "unknown parameter {}: this view takes {}",
                otelprof_primitives::escape::quote(key),
                SELECT
                    .iter()
                    .chain(extra)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if ARGUMENTS.contains(&key.as_str()) {
            if !arguments.is_empty() {
                return Err(format!(
                    "{} is given more than once",
                    otelprof_primitives::escape::quote(key)
                ));
            }
            arguments.push(value);
            continue;
        }
        let flag = format!("--{}", key.replace('_', "-"));
        if SWITCHES.contains(&key.as_str()) {
            if matches!(value.as_str(), "" | "1" | "true" | "on") {
                argv.push(flag.into());
            }
            continue;
        }
        if value.is_empty() && !matches!(key.as_str(), "base" | "head") {
            // An empty field of a form: the flag's default.
            continue;
        }
        // `--flag=value`: a value starting with `-` stays a value.
        argv.push(format!("{flag}={value}").into());
    }
    // After `--`: the command's argument (a pattern starting with `-` stays a pattern), then
    // the store, the only path, which comes from the server.
    argv.push("--".into());
    argv.extend(arguments.into_iter().map(Into::into));
    argv.push(store.as_os_str().to_owned());
    Cli::try_parse_from(argv)
        .map(|cli| cli.command)
        .map_err(|e| {
            // clap's message names the flag; the UI names the parameter the same way.
            let text = e.render().to_string();
            text.lines()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("invalid parameters")
                .trim_start_matches("error: ")
                .to_owned()
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_the_cli_flags() {
        let p = Params::parse("where=service.version%3D1.5&where=span_name%3DGET+%2Fcart&type=cpu&lines=1&by=span_name&search=x");
        let Cmd::Top(args) = command("top", &p, Path::new("/s")).unwrap() else {
            panic!("top")
        };
        assert_eq!(
            args.select.conditions,
            ["service.version=1.5", "span_name=GET /cart"]
        );
        assert!(args.select.lines);
        assert_eq!(args.by.as_deref(), Some("span_name"));
        assert_eq!(args.paths, [Path::new("/s")]);
    }

    #[test]
    fn bad_parameters_are_refused_with_a_reason() {
        let err = command("top", &Params::parse("store=/etc"), Path::new("/s")).unwrap_err();
        assert!(err.contains("unknown parameter"), "{err}");
        let err = command("top", &Params::parse("type=heap"), Path::new("/s")).unwrap_err();
        assert!(err.contains("heap"), "{err}");
        // A value that looks like a flag stays a value; paths come only from the server.
        let Cmd::Top(args) = command(
            "top",
            &Params::parse("from=now-1h&where=--x"),
            Path::new("/s"),
        )
        .unwrap() else {
            panic!("top")
        };
        assert_eq!(args.select.from.as_deref(), Some("now-1h"));
        assert_eq!(args.paths, [Path::new("/s")]);
        let Cmd::Diff(args) = command(
            "diff",
            &Params::parse("base=service.version%3D1.0&head=service.version%3D2.0"),
            Path::new("/s"),
        )
        .unwrap() else {
            panic!("diff")
        };
        assert_eq!(args.base, "service.version=1.0");
    }

    #[test]
    fn focus_parameters_repeat_as_the_flags_do() {
        let p = Params::parse(
            "include=com.shop.*&include=*.Cart.add&exclude=*.Log.*&hide=java.*&hide=jdk.*",
        );
        let Cmd::Top(args) = command("top", &p, Path::new("/s")).unwrap() else {
            panic!("top")
        };
        assert_eq!(args.select.focus.include, ["com.shop.*", "*.Cart.add"]);
        assert_eq!(args.select.focus.exclude, ["*.Log.*"]);
        assert_eq!(args.select.focus.hide, ["java.*", "jdk.*"]);
        let s = args.select.selector().unwrap();
        assert_eq!(
            s.focus.describe(),
            "--include com.shop.* --include *.Cart.add --exclude *.Log.* --hide java.* --hide jdk.*"
        );
        // Every view with a selection takes them.
        for view in ["traces", "drilldown", "diff"] {
            let p = Params::parse("include=a.*&exclude=b.*&hide=c.*");
            assert!(command(view, &p, Path::new("/s")).is_ok(), "{view}");
        }
        // A blank pattern gets the CLI's error.
        let Cmd::Top(args) = command("top", &Params::parse("include=+"), Path::new("/s")).unwrap()
        else {
            panic!("top")
        };
        let err = format!("{:#}", args.select.selector().unwrap_err());
        assert_eq!(err, "--include \" \": an empty pattern");
    }

    #[test]
    fn findings_take_the_selection_only() {
        let p = Params::parse("where=span_name%3DGET+%2Fa&exclude=*.V.check&type=cpu&format=text");
        let Cmd::Findings(args) = command("findings", &p, Path::new("/s")).unwrap() else {
            panic!("findings")
        };
        assert_eq!(args.select.conditions, ["span_name=GET /a"]);
        assert!(args.new_against.is_none());
        assert_eq!(args.select.focus.exclude, ["*.V.check"]);
        assert_eq!(args.paths, [Path::new("/s")]);
        // `format` belongs to the UI: the answer is always the CLI's JSON.
        assert!(matches!(args.format, crate::cli::FindingsFormat::Text));
        assert!(args.fail_on.is_none());
        let p = Params::parse("new_against=service.version%3D1.4");
        let Cmd::Findings(args) = command("findings", &p, Path::new("/s")).unwrap() else {
            panic!("findings")
        };
        assert_eq!(args.new_against.as_deref(), Some("service.version=1.4"));
        let err = command("findings", &Params::parse("fail_on=info"), Path::new("/s")).unwrap_err();
        assert!(err.contains("unknown parameter"), "{err}");
        let err = command("findings", &Params::parse("by=span_name"), Path::new("/s")).unwrap_err();
        assert!(err.contains("unknown parameter"), "{err}");
    }

    #[test]
    fn the_function_is_the_commands_argument_once() {
        let p = Params::parse("function=-x.*&where=service.version%3D2&include=a.*&min=0");
        let Cmd::Callers(args) = command("callers", &p, Path::new("/s")).unwrap() else {
            panic!("callers")
        };
        assert_eq!(args.function, "-x.*");
        assert_eq!(args.select.conditions, ["service.version=2"]);
        assert_eq!(args.select.focus.include, ["a.*"]);
        assert_eq!(args.min, 0.0);
        assert_eq!(args.paths, [Path::new("/s")]);
        // A second one would be a path: refused.
        let err = command(
            "callers",
            &Params::parse("function=a&function=/etc"),
            Path::new("/s"),
        )
        .unwrap_err();
        assert!(err.contains("more than once"), "{err}");
        let err = command("top", &Params::parse("function=a"), Path::new("/s")).unwrap_err();
        assert!(err.contains("unknown parameter"), "{err}");
    }
}
