//! Wall time by thread state: how much of each function's time its threads spent running
//! Java code, in native code, blocked on a monitor, waiting, sleeping, or stopped by the
//! garbage collector. A merge grouped by [`STATE_KEY`] holds one stack per stack and state;
//! this reads the states back out of its groups. Pure: a merged table in, columns out.

use super::top::frame_totals;
use crate::merge::Merged;

/// The sample label wall samples carry their thread's state in (OTLP: `thread.state`).
pub const STATE_KEY: &str = "thread_state";

/// The states in the order tables print them: the running ones first, then the waits.
pub const ORDER: [&str; 7] = [
    "RUNNABLE",
    "NATIVE",
    "BLOCKED",
    "WAITING",
    "TIMED_WAITING",
    "GC_PAUSE",
    "UNKNOWN",
];

/// Whether `m` was merged grouped by the thread state.
pub fn grouped_by_state(m: &Merged) -> bool {
    matches!(
        m.group_key.as_deref(),
        Some("thread_state" | "thread.state")
    )
}

/// The states of `m`'s groups, in [`ORDER`] (any other state a newer agent sends after them,
/// by name), each with the group it is: empty unless `m` is grouped by state and some of its
/// samples carry one. Groups that are no state (samples without the label) are left out.
pub fn states_of(m: &Merged) -> Vec<(String, u32)> {
    if !grouped_by_state(m) {
        return Vec::new();
    }
    let mut found: Vec<(String, u32)> = m
        .groups
        .iter()
        .enumerate()
        .filter(|(_, name)| is_state_name(name))
        .map(|(g, name)| (name.clone(), u32::try_from(g).unwrap_or(u32::MAX)))
        .collect();
    let rank = |name: &str| ORDER.iter().position(|o| *o == name).unwrap_or(ORDER.len());
    found.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.0.cmp(&b.0)));
    found
}

/// A state's name: upper case letters and underscores (`[GC]` role groups and `<none>` are not).
fn is_state_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// Each function's total per thread state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateColumns {
    /// The states present, in [`ORDER`].
    pub names: Vec<String>,
    /// The selection's total in each state.
    pub totals: Vec<f64>,
    /// `by_frame[state][frame]`: the frame's total (anywhere on the stack) in that state.
    pub by_frame: Vec<Vec<f64>>,
}

impl StateColumns {
    /// The total of `frame` in each state, in [`StateColumns::names`]' order.
    pub fn of_frame(&self, frame: usize) -> Vec<f64> {
        self.by_frame
            .iter()
            .map(|column| column.get(frame).copied().unwrap_or(0.0))
            .collect()
    }
}

/// The columns of a merge grouped by [`STATE_KEY`]; `None` when no sample has a state (CPU,
/// allocation and lock profiles, or a merge not grouped by state).
pub fn state_columns(m: &Merged) -> Option<StateColumns> {
    let states = states_of(m);
    if states.is_empty() {
        return None;
    }
    let mut columns = StateColumns::default();
    for (name, group) in states {
        let t = frame_totals(m, Some(group));
        columns.names.push(name);
        columns.totals.push(t.total);
        columns.by_frame.push(t.total_value);
    }
    Some(columns)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::merge::Merger;
    use crate::select::{ProfileType, Selector};
    use otel_bridge::{FrameKind, Profile, ProfileBuilder};

    /// A wall profile: run → compute, 30 units RUNNABLE; run → read, 20 NATIVE;
    /// run → lock, 10 BLOCKED; idle → sleep, 40 TIMED_WAITING; and 5 without a state.
    fn wall() -> Profile {
        let mut b = ProfileBuilder::new(
            &[("samples", "count"), ("wall", "nanoseconds")],
            ("wall", "nanoseconds"),
            1,
        );
        let names = [
            "app.Run.run",
            "app.Run.compute",
            "app.Io.read",
            "app.Run.lock",
        ];
        let [run, compute, read, lock] = names.map(|n| b.function(n, "X.java", 1));
        let [l_run, l_compute, l_read, l_lock] =
            [run, compute, read, lock].map(|f| b.location(f, 1, FrameKind::Jvm));
        let sleep = b.function("java.lang.Thread.sleep", "Thread.java", 1);
        let l_sleep = b.location(sleep, 1, FrameKind::Jvm);
        let state = |b: &mut ProfileBuilder, s| b.str_label("thread_state", s);
        let runnable = state(&mut b, "RUNNABLE");
        let native = state(&mut b, "NATIVE");
        let blocked = state(&mut b, "BLOCKED");
        let sleeping = state(&mut b, "TIMED_WAITING");
        b.add_sample(&[l_compute, l_run], &[runnable], &[1, 30]);
        b.add_sample(&[l_read, l_run], &[native], &[1, 20]);
        b.add_sample(&[l_lock, l_run], &[blocked], &[1, 10]);
        b.add_sample(&[l_sleep], &[sleeping], &[1, 40]);
        b.add_sample(&[l_run], &[], &[1, 5]);
        b.build(0, 0)
    }

    fn merged(group_by: Option<&str>) -> Merged {
        let mut m = Merger::new(ProfileType::Wall, Selector::default(), group_by);
        m.add(&[], &wall());
        m.finish()
    }

    #[test]
    fn each_function_has_its_time_per_state_in_a_fixed_order() {
        let m = merged(Some(STATE_KEY));
        let c = state_columns(&m).unwrap();
        assert_eq!(c.names, ["RUNNABLE", "NATIVE", "BLOCKED", "TIMED_WAITING"]);
        assert_eq!(c.totals, [30.0, 20.0, 10.0, 40.0]);
        let frame = |name: &str| m.frames.iter().position(|f| f == name).unwrap();
        assert_eq!(c.of_frame(frame("app.Run.run")), [30.0, 20.0, 10.0, 0.0]);
        assert_eq!(c.of_frame(frame("app.Io.read")), [0.0, 20.0, 0.0, 0.0]);
        assert_eq!(
            c.of_frame(frame("java.lang.Thread.sleep")),
            [0.0, 0.0, 0.0, 40.0]
        );
        // The stateless sample is in the total, in no state's column.
        assert_eq!(m.total(), 105.0);
    }

    #[test]
    fn no_columns_without_states() {
        assert_eq!(state_columns(&merged(None)), None);
        assert_eq!(state_columns(&merged(Some("span_name"))), None);
        assert!(grouped_by_state(&merged(Some("thread.state"))));
    }
}
