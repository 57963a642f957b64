//! Work spread over all cores: the one loop behind every scan of the store (OTLP and pprof
//! files, columnar partitions).

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many threads [`for_each`] runs at most: the cores.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Runs `work` on every item, on as many threads as there are cores (and no more than items):
/// each thread takes the next item in turn and folds it into its own state, made by `init`.
/// Returns the threads' states, for the caller to combine; a thread that panicked leaves none.
pub(crate) fn for_each<T: Sync, S: Send>(
    items: &[T],
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, &T) + Sync,
) -> Vec<S> {
    let next = AtomicUsize::new(0);
    let workers = cores().min(items.len().max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut state = init();
                    while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                        work(&mut state, item);
                    }
                    state
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_worked_once() {
        let items: Vec<u64> = (1..=1000).collect();
        let states = for_each(&items, Vec::new, |seen: &mut Vec<u64>, &i| seen.push(i));
        let mut all: Vec<u64> = states.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, items);
        assert_eq!(for_each(&[] as &[u64], || 0, |_, _| {}).len(), 1);
    }
}
