//! The profile types beyond CPU, one engine each: [`wall`] (a thread that visits the other
//! threads in turn and signals or walks them), [`alloc`] (JVMTI sampled allocations, for the
//! allocation profile and the live heap), [`locks`] (contended monitors) and [`parks`]
//! (`java.util.concurrent` parks); and [`gc`], the garbage collection pauses that the wall
//! profile and the live heap read. CPU sampling has no engine of its own: the per-thread
//! timers and the handler in [`crate::sampling`] are it. Engines build on
//! [`crate::sampling`]; nothing there imports them.

pub(crate) mod alloc;
pub(crate) mod gc;
pub(crate) mod locks;
pub(crate) mod parks;
pub(crate) mod wall;
