//! The profile types beyond CPU, one engine each: [`wall`] (a thread that visits the other
//! threads in turn and signals or walks them), [`alloc`] (JVMTI sampled allocations),
//! [`locks`] (contended monitors) and [`parks`] (`java.util.concurrent` parks). CPU sampling
//! has no engine of its own: the per-thread timers and the handler in [`crate::sampling`] are
//! it. Engines build on [`crate::sampling`]; nothing there imports them.

pub(crate) mod alloc;
pub(crate) mod locks;
pub(crate) mod parks;
pub(crate) mod wall;
