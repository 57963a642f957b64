//! The engines of each profile type: [`cpu_engine`] (which of perf events, CPU timers or
//! `setitimer` samples CPU, chosen per session; their mechanics and the handler are in
//! [`crate::sampling`]), [`wall`] (a thread that visits the other threads in turn and signals
//! or walks them), [`alloc`] (JVMTI sampled allocations, for the allocation profile and the
//! live heap), [`locks`] (contended monitors) and [`parks`] (`java.util.concurrent` parks);
//! and [`gc`], the garbage collection pauses that the wall profile and the live heap read.
//! Engines build on [`crate::sampling`]; nothing there imports them.

pub(crate) mod alloc;
pub(crate) mod cpu_engine;
pub(crate) mod gc;
pub(crate) mod locks;
pub(crate) mod parks;
pub(crate) mod wall;
