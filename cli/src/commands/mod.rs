//! One module per command: each turns its parsed arguments into a question for the store's
//! query engine (or the agent, or the receiver) and prints the answer.

pub mod attach;
pub mod butterfly;
pub mod capture;
pub mod compact;
pub mod demo;
pub mod diff;
pub mod drilldown;
pub mod findings;
pub mod flame;
pub mod leaks;
pub mod profile;
pub mod receive;
pub mod run;
pub mod serve;
pub mod stores;
pub mod top;
pub mod traces;
pub mod trend;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use otelprof_store::query::Spec;
use otelprof_store::select::{self, Measure, Op, ProfileType, Selector};
use otelprof_store::{chain, format_time, StoreSource};

use crate::cli::SelectArgs;
use otelprof_primitives::escape;

pub use otelprof_store::now_unix_nanos;

impl SelectArgs {
    /// The profile type and what to add up of it: `--type` and `--value`, checked together.
    pub fn view(&self) -> anyhow::Result<(Option<ProfileType>, Measure)> {
        let Some(value) = &self.value else {
            return Ok((self.ty, Measure::Amount));
        };
        let (measure, implied) = Measure::parse(value).context("--value")?;
        let ty = match (self.ty, implied) {
            (Some(t), Some(i)) if t != i => bail!(
                "--value {value} is a value of {} profiles, not of {} (drop --type or --value)",
                i.name(),
                t.name()
            ),
            (Some(t), None) if matches!(t, ProfileType::Alloc | ProfileType::Lock) => bail!(
                "--value {value} is for cpu and wall profiles; {} profiles have {}",
                t.name(),
                if t == ProfileType::Alloc {
                    "bytes or objects"
                } else {
                    "delay or contentions"
                }
            ),
            (t, i) => t.or(i),
        };
        Ok((ty, measure))
    }

    /// One merge of `selector` in the view the flags ask for (`--type`, `--value`, `--lines`).
    pub fn spec(&self, selector: &Selector) -> anyhow::Result<Spec> {
        let (ty, measure) = self.view()?;
        Ok(Spec::new(ty, selector).view(measure, self.lines))
    }

    /// The selector the flags describe.
    pub fn selector(&self) -> anyhow::Result<Selector> {
        let now = now_unix_nanos();
        let mut s = Selector::default();
        for c in &self.conditions {
            s.conditions
                .push(select::Condition::parse(c).with_context(|| "--where".to_owned())?);
        }
        if let Some(t) = &self.trace_id {
            s.trace_id = Some(select::parse_trace_id(t).context("--trace-id")?);
        }
        for span in &self.span_id {
            s.span_ids
                .push(select::parse_span_id(span).context("--span-id")?);
        }
        if let Some(t) = &self.from {
            s.from = Some(otelprof_store::parse_time(t, now).context("--from")?);
        }
        if let Some(t) = &self.to {
            s.to = Some(otelprof_store::parse_time(t, now).context("--to")?);
        }
        if let (Some(f), Some(t)) = (s.from, s.to) {
            if f >= t {
                bail!("--from must be before --to");
            }
        }
        for (flag, texts, globs) in [
            ("--include", &self.focus.include, &mut s.focus.include),
            ("--exclude", &self.focus.exclude, &mut s.focus.exclude),
            ("--hide", &self.focus.hide, &mut s.focus.hide),
        ] {
            for t in texts {
                let glob = otelprof_store::focus::Glob::parse(t)
                    .map_err(|why| anyhow::anyhow!("{flag} {}: {why}", escape::quote(t)))?;
                globs.push(glob);
            }
        }
        Ok(s)
    }
}

/// The merge of what `selector` selects in `paths`, as `select`'s view asks (`--type`,
/// `--value`, `--lines`), broken down by `by`; an empty answer is an error saying why. Whole
/// hours of a compacted store answer from their rollups: a day reads 24 hourly sums.
pub fn merge_selection(
    paths: &[PathBuf],
    select: &SelectArgs,
    selector: &Selector,
    by: Option<&str>,
) -> anyhow::Result<(otelprof_store::merge::Merged, ProfileType)> {
    let source = open_source_for(paths, std::slice::from_ref(selector))?
        .narrow_to(selector)
        .use_rollups(false, by);
    let (merged, ty) = otelprof_store::query::merge(&source, select.spec(selector)?.by(by))?;
    if merged.stacks.is_empty() {
        bail!(
            "{}",
            otelprof_store::query::explain_empty(&source, &merged, ty, selector)
        );
    }
    Ok((merged, ty))
}

/// What `paths` hold: the columnar store of a store directory (of a bucket's store: its
/// local mirror, [`stores`]), the files under anything else ([`StoreSource`]); every file that cannot be read is reported once on stderr (the name and
/// the reason escaped: both can carry bytes from outside).
pub fn open_source(paths: &[PathBuf]) -> anyhow::Result<StoreSource> {
    open_paths(paths, None)
}

/// [`open_source`] for a command that narrows what it reads to `selectors`
/// ([`StoreSource::narrow_to_any`]): of a bucket's store, only what they read is fetched.
pub fn open_source_for(paths: &[PathBuf], selectors: &[Selector]) -> anyhow::Result<StoreSource> {
    open_paths(paths, Some(selectors))
}

fn open_paths(paths: &[PathBuf], selectors: Option<&[Selector]>) -> anyhow::Result<StoreSource> {
    let report = |path: &Path, err: &otelprof_store::FileError| {
        errln!(
            "otelprof: skipped {}: {}",
            escape::path(path),
            escape::escape(&chain(err))
        );
    };
    let paths = stores::local_paths(paths, selectors)?;
    Ok(StoreSource::open(&paths, Box::new(report))?)
}

/// The selection in words, for titles and subtitles.
pub fn describe(selector: &Selector, ty: ProfileType) -> String {
    let mut parts = vec![ty.name().to_owned()];
    for c in &selector.conditions {
        let op = match c.op {
            Op::Eq => "=",
            Op::Ne => "!=",
        };
        parts.push(format!("{}{op}{}", c.key, c.value));
    }
    if let Some(t) = selector.trace_id {
        parts.push(format!("trace {}", otel_bridge::model::hex(&t)));
    }
    for s in &selector.span_ids {
        parts.push(format!("span {}", otel_bridge::model::hex(s)));
    }
    if !selector.focus.is_empty() {
        parts.push(selector.focus.describe());
    }
    if let Some(f) = selector.from {
        parts.push(format!("from {}", format_time(f)));
    }
    if let Some(t) = selector.to {
        parts.push(format!("to {}", format_time(t)));
    }
    parts.join(", ")
}
