//! Starved pools: request threads waiting for a pooled thread or a pooled resource, from the
//! wall profile.
//!
//! Waiting for a pooled *resource* (a connection from a pool, a permit, an element of a
//! blocking queue) is queueing by itself: all of it counts. Waiting for a *task* given to an
//! executor is not: a request that fans out waits as long as its task runs, with the pool
//! keeping up. What counts there is the wait beyond the pools' busy time — the time requests
//! waited on futures minus the time the pools' workers spent running tasks — which is the time
//! tasks sat queued behind each other.

use super::evidence::{find, Evidence, Pattern};
use super::{method_line, Draft, Finding, Inputs, Thresholds};
use crate::merge::{Merged, NO_GROUP};
use crate::query::requests::EndpointCounts;
use crate::select::ProfileType;
use otelprof_primitives::thread_role;

pub const THRESHOLDS: Thresholds = Thresholds {
    info: 0.05,
    warning: 0.15,
    critical: 0.30,
};

/// Waits for a task run by an executor.
const TASK_WAITS: &[&str] = &[
    "java.util.concurrent.FutureTask.get",
    "java.util.concurrent.CompletableFuture.get",
    "java.util.concurrent.CompletableFuture.join",
    "java.util.concurrent.AbstractExecutorService.invokeAll",
    "java.util.concurrent.AbstractExecutorService.invokeAny",
    "java.util.concurrent.ExecutorCompletionService.take",
];

/// Waits for a pooled resource: a blocking queue's element, a permit, a connection pool's
/// borrow.
const RESOURCE_WAITS: &[&str] = &[
    "java.util.concurrent.*BlockingQueue.take",
    "java.util.concurrent.*BlockingQueue.poll",
    "java.util.concurrent.*BlockingDeque.take*",
    "java.util.concurrent.*BlockingDeque.poll*",
    "java.util.concurrent.SynchronousQueue.take",
    "java.util.concurrent.SynchronousQueue.poll",
    "java.util.concurrent.Semaphore.acquire*",
    "com.zaxxer.hikari.*.getConnection",
    "org.apache.commons.pool2.*.borrowObject",
    "org.apache.commons.dbcp2.*.getConnection",
    "org.apache.tomcat.jdbc.pool.*.borrowConnection",
    "com.mchange.v2.*.checkoutPooledConnection",
];

/// A pool worker's frame, and the frames where an idle worker waits for work.
const WORKER: &[&str] = &[
    "java.util.concurrent.ThreadPoolExecutor.runWorker",
    "java.util.concurrent.ForkJoinPool.runWorker",
];
const WORKER_IDLE: &[&str] = &[
    "java.util.concurrent.ThreadPoolExecutor.getTask",
    "java.util.concurrent.ForkJoinPool.awaitWork",
];

fn in_request(group: &str) -> bool {
    group != NO_GROUP && !thread_role::is_role_frame(group)
}

/// Wall time of a merge's stacks, split: request threads' own (in a request, not a pool
/// worker's), and pool workers' busy time (running a task, not waiting for one).
fn split_wall(m: &Merged) -> (f64, f64) {
    let worker = Pattern::new(WORKER, &[], &[]);
    let idle = Pattern::new(WORKER_IDLE, &[], &[]);
    let matches = |frames: &[u32], p: &Pattern| {
        frames
            .iter()
            .any(|&f| p.triggers.iter().any(|g| g.matches(m.frame(f))))
    };
    let (mut requests, mut busy) = (0.0, 0.0);
    for s in &m.stacks {
        if matches(&s.frames, &worker) {
            if !matches(&s.frames, &idle) {
                busy += s.value;
            }
        } else if in_request(m.group(s.group)) {
            requests += s.value;
        }
    }
    (requests, busy)
}

pub fn starved(inputs: &Inputs, requests: &EndpointCounts) -> Vec<Finding> {
    let m = &inputs.wall;
    let (request_wall, busy) = split_wall(m);
    let mut out = Vec::new();

    let resources = Pattern::new(RESOURCE_WAITS, &[], &[]);
    let mut e = find(m, &resources, in_request);
    e.total = request_wall;
    out.extend(draft(
        inputs,
        requests,
        &resources,
        e,
        "Requests wait for a pooled resource",
        "size the pool for the concurrency it serves (or shorten what holds a resource), and \
         give waits a timeout",
        String::new(),
    ));

    let tasks = Pattern::new(TASK_WAITS, &[], &[]);
    let mut e = find(m, &tasks, in_request);
    e.total = request_wall;
    let waited = e.value;
    let queued = (waited - busy).max(0.0);
    let note = format!(
        "requests waited {:.2} s on tasks while pool workers ran tasks for {:.2} s: {:.2} s queued",
        waited / 1e9,
        busy / 1e9,
        queued / 1e9
    );
    scale(&mut e, queued);
    out.extend(draft(
        inputs,
        requests,
        &tasks,
        e,
        "Requests queue for a starved thread pool",
        "give the pool as many threads as the requests that wait on it (or a bounded queue that \
         rejects), or stop blocking the request thread on the pool",
        note,
    ));
    out
}

/// Makes `e` add up to `value`, its endpoints and methods scaled alike (its stacks keep the
/// time they waited: they show where).
fn scale(e: &mut Evidence, value: f64) {
    let k = if e.value > 0.0 { value / e.value } else { 0.0 };
    e.value = value;
    e.count *= k;
    for (_, v) in e.endpoints.iter_mut().chain(e.methods.iter_mut()) {
        *v *= k;
    }
}

fn draft(
    inputs: &Inputs,
    requests: &EndpointCounts,
    pattern: &Pattern,
    evidence: Evidence,
    title: &str,
    fix: &'static str,
    note: String,
) -> Option<Finding> {
    let line = method_line(&inputs.lines.wall, pattern, &evidence, in_request);
    let title = match &evidence.method {
        Some((method, _)) => format!("{title} in {method}"),
        None => title.to_owned(),
    };
    let note = if evidence.total > 0.0 && note.is_empty() {
        format!("request threads' wall time {:.2} s", evidence.total / 1e9)
    } else {
        note
    };
    Draft {
        rule: "starved-pool",
        title,
        fix,
        thresholds: THRESHOLDS,
        ty: ProfileType::Wall,
        of: "request threads' wall time",
        m: &inputs.wall,
        evidence,
        note,
        line,
    }
    .finish(requests)
}
