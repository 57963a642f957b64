//! What `top` computes: functions ranked by self and total value, or the value broken down by
//! a key (`span_name`, `service.version`, `thread.name`, …). Pure: a merged table in, rows out.

use crate::merge::Merged;

/// Self and total of every frame of a merged table, indexed by frame id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameTotals {
    pub self_value: Vec<f64>,
    pub total_value: Vec<f64>,
    pub self_count: Vec<f64>,
    pub total_count: Vec<f64>,
    /// Sum over the stacks counted (the 100% of the percentages).
    pub total: f64,
    pub count: f64,
    pub stacks: usize,
}

/// Self (leaf) and total (anywhere on the stack, once per stack however often it recurses)
/// of every frame, over the stacks of `group` (all groups when `None`).
pub fn frame_totals(m: &Merged, group: Option<u32>) -> FrameTotals {
    let n = m.frames.len();
    let mut t = FrameTotals {
        self_value: vec![0.0; n],
        total_value: vec![0.0; n],
        self_count: vec![0.0; n],
        total_count: vec![0.0; n],
        ..FrameTotals::default()
    };
    // `seen[f] == stamp`: frame f already counted for the current stack.
    let mut seen = vec![usize::MAX; n];
    for (stamp, s) in m.stacks.iter().enumerate() {
        if group.is_some_and(|g| g != s.group) {
            continue;
        }
        t.total += s.value;
        t.count += s.count;
        t.stacks += 1;
        if let Some(&leaf) = s.frames.last() {
            let i = leaf as usize;
            if let (Some(v), Some(c)) = (t.self_value.get_mut(i), t.self_count.get_mut(i)) {
                *v += s.value;
                *c += s.count;
            }
        }
        for &f in &s.frames {
            let i = f as usize;
            if seen.get(i) == Some(&stamp) {
                continue;
            }
            if let Some(x) = seen.get_mut(i) {
                *x = stamp;
            }
            if let (Some(v), Some(c)) = (t.total_value.get_mut(i), t.total_count.get_mut(i)) {
                *v += s.value;
                *c += s.count;
            }
        }
    }
    t
}

#[derive(Clone, Debug, PartialEq)]
pub struct FunctionRow {
    pub name: String,
    /// The name as people read it, with its source file ([`Merged::frame_label`]).
    pub label: String,
    pub self_value: f64,
    pub total_value: f64,
}

#[derive(Debug, PartialEq)]
pub struct TopTable {
    /// Sorted by self, then total (both descending), then name.
    pub rows: Vec<FunctionRow>,
    pub total: f64,
    pub count: f64,
}

pub fn top_functions(m: &Merged, group: Option<u32>) -> TopTable {
    let t = frame_totals(m, group);
    let mut rows: Vec<FunctionRow> = (0..m.frames.len())
        .filter(|&i| t.total_value.get(i).is_some_and(|v| *v != 0.0))
        .map(|i| FunctionRow {
            name: m.frames.get(i).cloned().unwrap_or_default(),
            label: m
                .frame_label(u32::try_from(i).unwrap_or(u32::MAX))
                .into_owned(),
            self_value: t.self_value.get(i).copied().unwrap_or(0.0),
            total_value: t.total_value.get(i).copied().unwrap_or(0.0),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.self_value
            .total_cmp(&a.self_value)
            .then(b.total_value.total_cmp(&a.total_value))
            .then_with(|| a.name.cmp(&b.name))
    });
    TopTable {
        rows,
        total: t.total,
        count: t.count,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct GroupRow {
    pub name: String,
    pub value: f64,
    pub count: f64,
    /// The function with the most self value in the group.
    pub hottest: String,
    pub hottest_value: f64,
    /// Requests in the group, when known (see `--requests`).
    pub requests: Option<f64>,
}

/// The value per group, largest first.
pub fn by_group(m: &Merged) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = (0..m.groups.len())
        .map(|g| {
            let g = u32::try_from(g).unwrap_or(u32::MAX);
            let t = top_functions(m, Some(g));
            let (hottest, hottest_value) = t
                .rows
                .first()
                .map(|r| (r.name.clone(), r.self_value))
                .unwrap_or_default();
            GroupRow {
                name: m.group(g).to_owned(),
                value: t.total,
                count: t.count,
                hottest,
                hottest_value,
                requests: None,
            }
        })
        .filter(|r| r.value != 0.0 || r.count != 0.0)
        .collect();
    rows.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::Merger;
    use crate::select::{ProfileType, Selector};
    use otel_bridge::{FrameKind, Profile, ProfileBuilder};

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

    fn merged(group_by: Option<&str>) -> Merged {
        let p = cpu_profile();
        let mut m = Merger::new(ProfileType::Cpu, Selector::default(), group_by);
        m.add(&[], &p);
        m.add(&[], &p);
        m.finish()
    }

    fn row(name: &str, self_value: f64, total_value: f64) -> FunctionRow {
        FunctionRow {
            name: name.to_owned(),
            label: format!("{name} (X.java)"),
            self_value,
            total_value,
        }
    }

    #[test]
    fn recursion_counts_once_toward_total_and_profiles_pool() {
        let m = merged(None);
        let table = top_functions(&m, None);
        assert_eq!((table.total, table.count), (32.0, 6.0));
        assert_eq!(
            table.rows,
            vec![
                row("app.A.a", 20.0, 20.0),
                row("app.C.c", 10.0, 10.0),
                row("app.Main.main", 2.0, 32.0),
                row("app.B.b", 0.0, 20.0),
            ]
        );
    }

    #[test]
    fn groups_rank_by_value() {
        let m = merged(Some("thread.name"));
        let rows = by_group(&m);
        let names: Vec<(&str, f64, &str)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.value, r.hottest.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("t1", 20.0, "app.A.a"),
                ("t2", 10.0, "app.C.c"),
                ("<none>", 2.0, "app.Main.main")
            ]
        );
        let counts: Vec<f64> = rows.iter().map(|r| r.count).collect();
        assert_eq!(counts, [2.0, 2.0, 2.0]);
    }

    #[test]
    fn pools_read_as_one() {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
        let f = b.function("app.Work.run", "Work.java", 1);
        let l = b.location(f, 1, FrameKind::Jvm);
        for (thread, value) in [("exec-1", 3), ("exec-2", 4), ("exec-19", 5), ("main", 1)] {
            let t = b.str_label("thread_name", thread);
            b.add_sample(&[l], &[t], &[value]);
        }
        let p = b.build(0, 0);
        let mut m = Merger::new(ProfileType::Cpu, Selector::default(), Some("thread.pool"));
        m.add(&[], &p);
        let groups: Vec<(String, f64)> = by_group(&m.finish())
            .into_iter()
            .map(|g| (g.name, g.value))
            .collect();
        assert_eq!(
            groups,
            [("exec-N".to_owned(), 12.0), ("main".to_owned(), 1.0)]
        );
        let mut only = Selector::default();
        only.add_terms("thread.pool=exec-N", 0).unwrap();
        let mut m = Merger::new(ProfileType::Cpu, only, None);
        m.add(&[], &p);
        assert_eq!(m.finish().total(), 12.0);
    }

    #[test]
    fn lines_break_functions_down() {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
        let main = b.function("app.Main.main", "Main.java", 1);
        let work = b.function("app.Work.run", "Work.java", 10);
        let l_main = b.location(main, 3, FrameKind::Jvm);
        let hot = b.location(work, 12, FrameKind::Jvm);
        let cold = b.location(work, 15, FrameKind::Jvm);
        b.add_sample(&[hot, l_main], &[], &[7]);
        b.add_sample(&[cold, l_main], &[], &[3]);
        let p = b.build(0, 0);
        let by = |lines: bool| {
            let mut m = Merger::new(ProfileType::Cpu, Selector::default(), None).lines(lines);
            m.add(&[], &p);
            let t = top_functions(&m.finish(), None);
            t.rows
                .into_iter()
                .map(|r| (r.label, r.self_value))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            by(false),
            [
                ("app.Work.run (Work.java)".to_owned(), 10.0),
                ("app.Main.main (Main.java)".to_owned(), 0.0)
            ]
        );
        assert_eq!(
            by(true),
            [
                ("app.Work.run (Work.java:12)".to_owned(), 7.0),
                ("app.Work.run (Work.java:15)".to_owned(), 3.0),
                ("app.Main.main (Main.java:3)".to_owned(), 0.0)
            ]
        );
    }
}
