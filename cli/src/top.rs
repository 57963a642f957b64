//! `otelprof top`: pooling decoded profiles and ranking functions (or threads) by one sample
//! value. Pure: profiles in, tables out; reading files is `load`'s job.

use std::collections::HashMap;
use std::fmt::Write as _;

use otel_bridge::{LocationId, Profile};

use crate::units::{format_value, percent};

/// Profiles pooled on one sample type: which value of each sample to add up.
#[derive(Debug)]
pub struct Pool<'a> {
    /// Each profile with the index of the selected value in its samples.
    members: Vec<(&'a Profile, usize)>,
    pub sample_type: String,
    pub unit: String,
    /// Profiles left out because they do not carry the selected type (or carry it in another
    /// unit), e.g. allocation profiles in a directory of CPU profiles.
    pub skipped: usize,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("no profiles to read")]
    NoProfiles,
    #[error("no profile has a sample type named {wanted:?} (types present: {present})")]
    UnknownSampleType { wanted: String, present: String },
}

/// Pools `profiles` on the sample type named `sample_index`, or by default on the type most
/// profiles have as their default (the last one; `cpu` for CPU profiles), so that a directory
/// mixing CPU and allocation profiles shows CPU time unless asked otherwise.
pub fn pool<'a>(
    profiles: &[&'a Profile],
    sample_index: Option<&str>,
) -> Result<Pool<'a>, PoolError> {
    let type_of = |p: &Profile, i: usize| {
        p.sample_types
            .get(i)
            .map(|vt| (p.str(vt.ty).to_owned(), p.str(vt.unit).to_owned()))
    };
    let selected = match sample_index {
        Some(wanted) => profiles
            .iter()
            .find_map(|p| p.sample_type_index(wanted).and_then(|i| type_of(p, i)))
            .ok_or_else(|| {
                if profiles.is_empty() {
                    return PoolError::NoProfiles;
                }
                let mut present: Vec<&str> = profiles
                    .iter()
                    .flat_map(|p| p.sample_types.iter().map(|vt| p.str(vt.ty)))
                    .collect();
                present.sort_unstable();
                present.dedup();
                PoolError::UnknownSampleType {
                    wanted: wanted.to_owned(),
                    present: present.join(", "),
                }
            })?,
        None => {
            // Most common default type; ties go to the one seen first.
            let mut counts: Vec<((String, String), usize)> = Vec::new();
            for p in profiles {
                let Some(last) = p.sample_types.len().checked_sub(1) else {
                    continue;
                };
                let Some(ty) = type_of(p, last) else { continue };
                match counts.iter_mut().find(|(t, _)| *t == ty) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((ty, 1)),
                }
            }
            let mut best: Option<((String, String), usize)> = None;
            for (ty, n) in counts {
                if best.as_ref().is_none_or(|(_, m)| n > *m) {
                    best = Some((ty, n));
                }
            }
            best.map(|(ty, _)| ty).ok_or(PoolError::NoProfiles)?
        }
    };
    let (sample_type, unit) = selected;
    let mut members = Vec::with_capacity(profiles.len());
    let mut skipped = 0;
    for &p in profiles {
        match p.sample_type_index(&sample_type) {
            Some(i) if p.sample_types.get(i).map(|vt| p.str(vt.unit)) == Some(&unit) => {
                members.push((p, i))
            }
            _ => skipped += 1,
        }
    }
    Ok(Pool {
        members,
        sample_type,
        unit,
        skipped,
    })
}

impl Pool<'_> {
    pub fn profile_count(&self) -> usize {
        self.members.len()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionRow {
    pub name: String,
    /// Value of the samples whose leaf frame is this function.
    pub self_value: i64,
    /// Value of the samples with this function anywhere on the stack, counted once per
    /// sample however often it recurses.
    pub total_value: i64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct TopTable {
    /// Sorted by self, then total (both descending), then name.
    pub rows: Vec<FunctionRow>,
    /// Sum over all samples, the 100% of the percentages.
    pub total: i64,
    pub samples: usize,
}

const UNKNOWN: &str = "<unknown>";

/// Function names pooled across profiles, numbered densely.
#[derive(Default)]
struct Names {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

impl Names {
    fn intern(&mut self, name: &str) -> usize {
        let name = if name.is_empty() { UNKNOWN } else { name };
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.list.push(name.to_owned());
        self.index.insert(name.to_owned(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// Ranks the functions of `pool` by self value. Functions are pooled by name, so the same
/// method in different profiles (or with different ids) is one row.
pub fn top_functions(pool: &Pool<'_>) -> TopTable {
    let mut names = Names::default();
    let mut self_values: Vec<i64> = Vec::new();
    let mut total_values: Vec<i64> = Vec::new();
    // `seen[name] == stamp` when the name was already counted for the current sample.
    let mut seen: Vec<usize> = Vec::new();
    let mut stamp = 0usize;
    let mut total = 0i64;
    let mut samples = 0usize;

    for &(profile, index) in &pool.members {
        let function_names: Vec<usize> = profile
            .functions
            .iter()
            .map(|f| names.intern(profile.str(f.name)))
            .collect();
        // Per location, its frames' names, innermost first.
        let location_names: Vec<Vec<usize>> = profile
            .locations
            .iter()
            .map(|loc| {
                if loc.lines.is_empty() {
                    // Unsymbolized (pprof from native tools); the address is all there is.
                    vec![names.intern(&format!("{:#x}", loc.address))]
                } else {
                    loc.lines
                        .iter()
                        .map(|line| {
                            function_names
                                .get(line.function.0 as usize)
                                .copied()
                                .unwrap_or_else(|| names.intern(UNKNOWN))
                        })
                        .collect()
                }
            })
            .collect();
        let unknown = names.intern(UNKNOWN);
        let n = names.list.len();
        self_values.resize(n, 0);
        total_values.resize(n, 0);
        seen.resize(n, usize::MAX);

        let frames_of = |id: &LocationId| -> &[usize] {
            location_names
                .get(id.0 as usize)
                .map_or(std::slice::from_ref(&unknown), Vec::as_slice)
        };
        for sample in &profile.samples {
            let value = sample.values.get(index).copied().unwrap_or(0);
            samples += 1;
            total = total.saturating_add(value);
            if let Some(&leaf) = sample.locations.first().and_then(|l| frames_of(l).first()) {
                self_values[leaf] = self_values[leaf].saturating_add(value);
            }
            stamp += 1;
            for name in sample.locations.iter().flat_map(frames_of) {
                if seen[*name] != stamp {
                    seen[*name] = stamp;
                    total_values[*name] = total_values[*name].saturating_add(value);
                }
            }
        }
    }

    let mut rows: Vec<FunctionRow> = names
        .list
        .into_iter()
        .zip(self_values.into_iter().zip(total_values))
        .filter(|(_, (s, t))| *s != 0 || *t != 0)
        .map(|(name, (self_value, total_value))| FunctionRow {
            name,
            self_value,
            total_value,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.self_value
            .cmp(&a.self_value)
            .then(b.total_value.cmp(&a.total_value))
            .then_with(|| a.name.cmp(&b.name))
    });
    TopTable {
        rows,
        total,
        samples,
    }
}

const NO_THREAD: &str = "<no thread_name>";

#[derive(Debug, PartialEq, Eq)]
pub struct ThreadTable {
    /// `(thread name, value)`, descending by value, then by name.
    pub rows: Vec<(String, i64)>,
    pub total: i64,
    pub samples: usize,
}

/// Value per `thread_name` label.
pub fn by_thread(pool: &Pool<'_>) -> ThreadTable {
    let mut per_thread: HashMap<&str, i64> = HashMap::new();
    let mut total = 0i64;
    let mut samples = 0usize;
    for &(profile, index) in &pool.members {
        for sample in &profile.samples {
            samples += 1;
            let value = sample.values.get(index).copied().unwrap_or(0);
            total = total.saturating_add(value);
            let thread = profile
                .label_str(sample, "thread_name")
                .unwrap_or(NO_THREAD);
            let acc = per_thread.entry(thread).or_insert(0);
            *acc = acc.saturating_add(value);
        }
    }
    let mut rows: Vec<(String, i64)> = per_thread
        .into_iter()
        .map(|(name, v)| (name.to_owned(), v))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ThreadTable {
        rows,
        total,
        samples,
    }
}

/// The header line above either table.
pub fn render_header(pool: &Pool<'_>, total: i64, samples: usize) -> String {
    let mut header = format!(
        "Type: {} ({}), {} profile{}, {} samples, total {}",
        pool.sample_type,
        pool.unit,
        pool.profile_count(),
        if pool.profile_count() == 1 { "" } else { "s" },
        samples,
        format_value(total, &pool.unit),
    );
    if pool.skipped > 0 {
        let _ = write!(
            header,
            " ({} profile{} without this type left out; see --sample-index)",
            pool.skipped,
            if pool.skipped == 1 { "" } else { "s" }
        );
    }
    header
}

/// The function table, at most `limit` rows (0 = all).
pub fn render_top(table: &TopTable, unit: &str, limit: usize) -> String {
    let shown = if limit == 0 {
        table.rows.len()
    } else {
        limit.min(table.rows.len())
    };
    let cells: Vec<[String; 5]> = table.rows[..shown]
        .iter()
        .map(|r| {
            [
                format_value(r.self_value, unit),
                percent(r.self_value, table.total),
                format_value(r.total_value, unit),
                percent(r.total_value, table.total),
                r.name.clone(),
            ]
        })
        .collect();
    let mut out = render_columns(&["self", "self%", "total", "total%", "function"], &cells);
    if shown < table.rows.len() {
        let _ = writeln!(
            out,
            "({} more functions; --limit 0 shows all)",
            table.rows.len() - shown
        );
    }
    out
}

/// The per-thread table, at most `limit` rows (0 = all).
pub fn render_threads(table: &ThreadTable, unit: &str, limit: usize) -> String {
    let (rows, total) = (&table.rows, table.total);
    let shown = if limit == 0 {
        rows.len()
    } else {
        limit.min(rows.len())
    };
    let cells: Vec<[String; 3]> = rows[..shown]
        .iter()
        .map(|(name, v)| [format_value(*v, unit), percent(*v, total), name.clone()])
        .collect();
    let mut out = render_columns(&["total", "total%", "thread"], &cells);
    if shown < rows.len() {
        let _ = writeln!(
            out,
            "({} more threads; --limit 0 shows all)",
            rows.len() - shown
        );
    }
    out
}

/// Right-aligned numeric columns, then the last column (a name) left-aligned and unpadded.
fn render_columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for (i, h) in header.iter().enumerate() {
        widths[i] = h.chars().count();
    }
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        for (i, cell) in cells.enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{:>width$}  ", cell, width = widths[i]);
            }
        }
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use otel_bridge::{FrameKind, ProfileBuilder};

    /// main → a → b → a (recursion) with 10 units on `t1`, main → c with 5 on `t2`, and one
    /// unlabelled sample of 1 on main itself.
    fn cpu_profile() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("cpu", "nanoseconds")],
            ("cpu", "nanoseconds"),
            1,
        );
        let [main, a, bb, c] =
            ["app.Main.main", "app.A.a", "app.B.b", "app.C.c"].map(|n| b.function(n, "X.java", 1));
        let [l_main, l_a, l_b, l_c] = [main, a, bb, c].map(|f| b.location(f, 1, FrameKind::Jvm));
        let t1 = b.str_label("thread_name", "t1");
        let t2 = b.str_label("thread_name", "t2");
        b.add_sample(&[l_a, l_b, l_a, l_main], &[t1], &[1, 10]);
        b.add_sample(&[l_c, l_main], &[t2], &[1, 5]);
        b.add_sample(&[l_main], &[], &[1, 1]);
        b.build(0, 0)
    }

    fn alloc_profile() -> Profile {
        let mut b = ProfileBuilder::new(&[("alloc_space", "bytes")], ("alloc_space", "bytes"), 1);
        let f = b.function("app.A.a", "A.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        b.add_sample(&[l], &[], &[4096]);
        b.build(0, 0)
    }

    fn row(name: &str, self_value: i64, total_value: i64) -> FunctionRow {
        FunctionRow {
            name: name.to_owned(),
            self_value,
            total_value,
        }
    }

    #[test]
    fn recursion_counts_once_toward_total() {
        let p = cpu_profile();
        let pool = pool(&[&p], None).unwrap();
        assert_eq!(
            (pool.sample_type.as_str(), pool.unit.as_str()),
            ("cpu", "nanoseconds")
        );
        let table = top_functions(&pool);
        assert_eq!(table.total, 16);
        assert_eq!(table.samples, 3);
        assert_eq!(
            table.rows,
            vec![
                row("app.A.a", 10, 10),
                row("app.C.c", 5, 5),
                row("app.Main.main", 1, 16),
                row("app.B.b", 0, 10),
            ]
        );
    }

    #[test]
    fn profiles_pool_by_name_and_other_types_are_skipped() {
        let (p1, p2, alloc) = (cpu_profile(), cpu_profile(), alloc_profile());
        let pool = pool(&[&alloc, &p1, &p2], None).unwrap();
        assert_eq!(pool.sample_type, "cpu");
        assert_eq!((pool.profile_count(), pool.skipped), (2, 1));
        let table = top_functions(&pool);
        assert_eq!(table.total, 32);
        assert_eq!(table.rows[0], row("app.A.a", 20, 20));

        let by_count = super::pool(&[&p1, &alloc], Some("samples")).unwrap();
        assert_eq!(top_functions(&by_count).total, 3);

        let alloc_only = super::pool(&[&p1, &alloc], Some("alloc_space")).unwrap();
        let table = top_functions(&alloc_only);
        assert_eq!(table.rows, vec![row("app.A.a", 4096, 4096)]);
    }

    #[test]
    fn unknown_sample_type_lists_the_present_ones() {
        let (p, alloc) = (cpu_profile(), alloc_profile());
        assert_eq!(
            pool(&[&p, &alloc], Some("wall")).unwrap_err(),
            PoolError::UnknownSampleType {
                wanted: "wall".into(),
                present: "alloc_space, cpu, samples".into()
            }
        );
        assert_eq!(pool(&[], None).unwrap_err(), PoolError::NoProfiles);
    }

    #[test]
    fn threads_are_totalled_by_label() {
        let p = cpu_profile();
        let pool = pool(&[&p], None).unwrap();
        let table = by_thread(&pool);
        assert_eq!((table.total, table.samples), (16, 3));
        assert_eq!(
            table.rows,
            vec![
                ("t1".to_owned(), 10),
                ("t2".to_owned(), 5),
                (NO_THREAD.to_owned(), 1)
            ]
        );
    }

    #[test]
    fn broken_references_count_as_unknown() {
        let mut p = cpu_profile();
        p.samples[1].locations[0] = LocationId(999);
        p.functions[1].name = otel_bridge::StrId(0);
        let pool = pool(&[&p], None).unwrap();
        let table = top_functions(&pool);
        // Function 1 (main) lost its name; sample 1's leaf points nowhere.
        assert_eq!(
            table.rows[..2],
            [row("app.A.a", 10, 10), row(UNKNOWN, 6, 16)]
        );
    }

    #[test]
    fn tables_render_aligned() {
        let p = cpu_profile();
        let pool = pool(&[&p], None).unwrap();
        let table = top_functions(&pool);
        let text = render_top(&table, &pool.unit, 3);
        let expected = "\
self   self%  total   total%  function
10ns  62.50%   10ns   62.50%  app.A.a
 5ns  31.25%    5ns   31.25%  app.C.c
 1ns   6.25%   16ns  100.00%  app.Main.main
(1 more functions; --limit 0 shows all)
";
        assert_eq!(text, expected);
        assert_eq!(
            render_header(&pool, table.total, table.samples),
            "Type: cpu (nanoseconds), 1 profile, 3 samples, total 16ns"
        );
        assert_eq!(
            render_threads(&by_thread(&pool), "count", 0),
            "\
total  total%  thread
   10  62.50%  t1
    5  31.25%  t2
    1   6.25%  <no thread_name>
"
        );
    }
}
