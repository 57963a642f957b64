//! What the JVM's management beans say about its collections and its heap, read through JNI
//! on the aggregator thread (never from a GC callback, where JNI is forbidden).
//!
//! - **Collections** (`GarbageCollectorMXBean.getCollectionCount`): the live heap counts an
//!   object only once a collection that can free it has run since it was sampled. JVMTI's
//!   GarbageCollectionFinish cannot say that alone: HotSpot posts it for every
//!   stop-the-world operation of a collector, G1's Remark and Cleanup pauses included, which
//!   free no young object. So the count is the beans' that count collections: every bean of
//!   a stop-the-world collector except G1's `G1 Concurrent GC` (JDK 20+, it counts the Remark
//!   and Cleanup pauses), or the `Cycles` beans of ZGC and Shenandoah (their `Pauses` beans
//!   count pauses; generational ZGC's `Major Cycles` when it has them, since its minor cycles
//!   need not clear weak references). A concurrent collector's cycle may have begun before
//!   the object was allocated and treat it as live, so two of its cycles are needed
//!   ([`Management::survivals_needed`]).
//! - **Heap used after the last collection**: the heap pools' usage after the JVM's most
//!   recent collection, from the `GcInfo` of the collector bean whose last collection ended
//!   last (`com.sun.management.GarbageCollectorMXBean.getLastGcInfo().getMemoryUsageAfterGc()`).
//!   Not the pools' `getCollectionUsage()` (what the OpenTelemetry semantic convention
//!   `jvm.memory.used_after_last_gc` reports per pool): G1 updates its old generation's only
//!   at a full or mixed collection, so between them that sum leaves out everything promoted
//!   (80 MB held read as 17 MB after young collections, measured on JDK 17). The sum of the
//!   collection usages remains the fallback where `GcInfo` cannot be read.
//!
//! The beans need the `java.management` module; a runtime without it (a jlink image) gets
//! one log line, and the live heap counts pause ends instead ([`super::super::live`]).
//! The aggregator thread is one of the agent's own: the objects these calls allocate are
//! never sampled.

use jni::objects::{JObject, JString, JValue};
use jni::sys::{jobject, JNIEnv};

use crate::jvm::jvmti::{delete_global_ref, new_global_ref};

/// The beans, held by global references of the aggregator thread.
pub(crate) struct Management {
    /// The collector beans whose counts are summed.
    collectors: Vec<jobject>,
    /// The collector beans whose last collection's `GcInfo` tells the heap after it: every
    /// bean but those that count pauses (ZGC's and Shenandoah's `Pauses`, G1's
    /// `G1 Concurrent GC`), whose `GcInfo` follows a pause that collected nothing.
    collections_info: Vec<jobject>,
    heap_pools: Vec<jobject>,
    /// The heap pools' names (`String`s), the keys of a `GcInfo`'s usage map.
    heap_pool_names: Vec<jobject>,
    /// Collections that must follow an object's sampling before it counts as live: 1 for
    /// stop-the-world collectors, 2 for concurrent ones.
    pub(crate) survivals_needed: u64,
    /// The collector beans, with whether each is counted, for the log.
    pub(crate) described: String,
    /// A concurrent collector whose minor cycles leave weak references alone (generational
    /// ZGC's `Major Cycles` beans): between its major cycles, objects that died young can
    /// still be reachable through the live heap's weak references.
    pub(crate) generational_concurrent: bool,
}

/// Which collector beans count collections, by name, and how many collections an object
/// must outlive: see the module docs.
pub(crate) fn counted_collectors(names: &[String]) -> (Vec<bool>, u64) {
    let concurrent = names
        .iter()
        .any(|n| n.contains("ZGC") || n.contains("Shenandoah"));
    if concurrent {
        let majors = names.iter().any(|n| n.contains("Major Cycles"));
        let counted = names
            .iter()
            .map(|n| n.ends_with("Cycles") && (!majors || n.contains("Major")))
            .collect();
        return (counted, 2);
    }
    let counted: Vec<bool> = names.iter().map(|n| !n.contains("Concurrent")).collect();
    if counted.iter().any(|&c| c) {
        (counted, 1)
    } else {
        (vec![true; names.len()], 1)
    }
}

/// Whether a collector bean's `GcInfo` follows collections (not pauses that may collect
/// nothing): see [`Management`]'s `collections_info`.
fn collects(name: &str) -> bool {
    !name.contains("Pauses") && !name.contains("Concurrent GC")
}

type JniResult<T> = Result<T, jni::errors::Error>;

impl Management {
    /// Finds the beans.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv, in the live phase.
    pub(crate) unsafe fn open(jni: *mut JNIEnv) -> Result<Management, String> {
        // SAFETY: per this function's contract.
        let mut env = unsafe { jni::JNIEnv::from_raw(jni) }.map_err(|e| e.to_string())?;
        let found = env.with_local_frame(64, |env| -> JniResult<_> {
            let collectors = beans(env, "getGarbageCollectorMXBeans")?;
            let mut names = Vec::new();
            for bean in &collectors {
                let name = env
                    .call_method(bean, "getName", "()Ljava/lang/String;", &[])?
                    .l()?;
                names.push(env.get_string(&JString::from(name))?.into());
            }
            let mut heap = Vec::new();
            let mut heap_names = Vec::new();
            for pool in beans(env, "getMemoryPoolMXBeans")? {
                let ty = env
                    .call_method(&pool, "getType", "()Ljava/lang/management/MemoryType;", &[])?
                    .l()?;
                let ty = env
                    .call_method(&ty, "name", "()Ljava/lang/String;", &[])?
                    .l()?;
                let ty: String = env.get_string(&JString::from(ty))?.into();
                if ty == "HEAP" {
                    heap.push(global(jni, &pool));
                    let name = env
                        .call_method(&pool, "getName", "()Ljava/lang/String;", &[])?
                        .l()?;
                    heap_names.push(global(jni, &name));
                }
            }
            let (counted, needed) = counted_collectors(&names);
            let mut kept = Vec::new();
            let mut info = Vec::new();
            for ((bean, on), name) in collectors.iter().zip(&counted).zip(&names) {
                if *on {
                    kept.push(global(jni, bean));
                }
                if collects(name) {
                    info.push(global(jni, bean));
                }
            }
            let described = names
                .iter()
                .zip(&counted)
                .map(|(n, c)| format!("{n}{}", if *c { "" } else { " (not counted)" }))
                .collect::<Vec<_>>()
                .join(", ");
            Ok(Management {
                collectors: kept,
                collections_info: info,
                heap_pools: heap,
                heap_pool_names: heap_names,
                survivals_needed: needed,
                described,
                generational_concurrent: names.iter().any(|n| n.contains("Major Cycles")),
            })
        });
        let found = found.map_err(|e| e.to_string());
        clear_exception(&mut env);
        let m = found?;
        if m.collectors
            .iter()
            .chain(&m.collections_info)
            .chain(&m.heap_pools)
            .chain(&m.heap_pool_names)
            .any(|r| r.is_null())
        {
            // SAFETY: per this function's contract.
            unsafe { m.close(jni) };
            return Err("cannot hold the management beans".to_owned());
        }
        Ok(m)
    }

    /// Collections counted so far, or `None` if the beans cannot be read.
    ///
    /// # Safety
    /// As for [`Management::open`].
    pub(crate) unsafe fn collections(&self, jni: *mut JNIEnv) -> Option<u64> {
        // SAFETY: per this function's contract.
        let mut env = unsafe { jni::JNIEnv::from_raw(jni) }.ok()?;
        let mut total = 0u64;
        for &bean in &self.collectors {
            // SAFETY: a global reference held by this struct.
            let bean = unsafe { JObject::from_raw(bean) };
            let n = env
                .call_method(&bean, "getCollectionCount", "()J", &[])
                .and_then(|v| v.j());
            match n {
                Ok(n) => total += n.max(0) as u64,
                Err(_) => {
                    clear_exception(&mut env);
                    return None;
                }
            }
        }
        Some(total)
    }

    /// Bytes of the heap in use after the JVM's most recent collection (see the module docs);
    /// `None` when no collection has run or nothing says.
    ///
    /// # Safety
    /// As for [`Management::open`].
    pub(crate) unsafe fn heap_used_after_gc(&self, jni: *mut JNIEnv) -> Option<u64> {
        // SAFETY: per this function's contract.
        let mut env = unsafe { jni::JNIEnv::from_raw(jni) }.ok()?;
        let after = env.with_local_frame(32, |env| self.after_last_collection(env));
        clear_exception(&mut env);
        match after {
            Ok(Some(used)) => Some(used),
            _ => {
                let sum = env.with_local_frame(16, |env| self.collection_usage(env));
                clear_exception(&mut env);
                sum.ok().flatten()
            }
        }
    }

    /// The heap pools' usage after the collection that ended last, from its `GcInfo`.
    fn after_last_collection(&self, env: &mut jni::JNIEnv<'_>) -> JniResult<Option<u64>> {
        let mut latest: Option<(i64, JObject<'_>)> = None;
        for &bean in &self.collections_info {
            // SAFETY: a global reference held by this struct.
            let bean = unsafe { JObject::from_raw(bean) };
            let info = env
                .call_method(&bean, "getLastGcInfo", "()Lcom/sun/management/GcInfo;", &[])?
                .l()?;
            if info.is_null() {
                continue;
            }
            let end = env.call_method(&info, "getEndTime", "()J", &[])?.j()?;
            if latest.as_ref().is_none_or(|(e, _)| end > *e) {
                latest = Some((end, info));
            }
        }
        let Some((_, info)) = latest else {
            return Ok(None);
        };
        let usages = env
            .call_method(&info, "getMemoryUsageAfterGc", "()Ljava/util/Map;", &[])?
            .l()?;
        let mut sum = None;
        for &name in &self.heap_pool_names {
            // SAFETY: a global reference held by this struct.
            let name = unsafe { JObject::from_raw(name) };
            let usage = env
                .call_method(
                    &usages,
                    "get",
                    "(Ljava/lang/Object;)Ljava/lang/Object;",
                    &[JValue::Object(&name)],
                )?
                .l()?;
            add_used(env, usage, &mut sum)?;
        }
        Ok(sum)
    }

    /// The heap pools' `getCollectionUsage().getUsed()`, summed.
    fn collection_usage(&self, env: &mut jni::JNIEnv<'_>) -> JniResult<Option<u64>> {
        let mut sum = None;
        for &pool in &self.heap_pools {
            // SAFETY: a global reference held by this struct.
            let pool = unsafe { JObject::from_raw(pool) };
            let usage = env
                .call_method(
                    &pool,
                    "getCollectionUsage",
                    "()Ljava/lang/management/MemoryUsage;",
                    &[],
                )?
                .l()?;
            add_used(env, usage, &mut sum)?;
        }
        Ok(sum)
    }

    /// Deletes the global references.
    ///
    /// # Safety
    /// As for [`Management::open`].
    pub(crate) unsafe fn close(self, jni: *mut JNIEnv) {
        for r in self
            .collectors
            .into_iter()
            .chain(self.collections_info)
            .chain(self.heap_pools)
            .chain(self.heap_pool_names)
        {
            // SAFETY: a global reference made by `open`, deleted once.
            unsafe { delete_global_ref(jni, r) };
        }
    }
}

/// Adds a `MemoryUsage`'s `getUsed()` to `sum` (nothing for a null usage), and frees the
/// local reference.
fn add_used(env: &mut jni::JNIEnv<'_>, usage: JObject<'_>, sum: &mut Option<u64>) -> JniResult<()> {
    if usage.is_null() {
        return Ok(());
    }
    let used = env.call_method(&usage, "getUsed", "()J", &[])?.j()?;
    env.delete_local_ref(usage)?;
    *sum.get_or_insert(0u64) += used.max(0) as u64;
    Ok(())
}

/// `ManagementFactory.<method>()`'s beans, as local references.
fn beans<'l>(env: &mut jni::JNIEnv<'l>, method: &str) -> JniResult<Vec<JObject<'l>>> {
    let list = env
        .call_static_method(
            "java/lang/management/ManagementFactory",
            method,
            "()Ljava/util/List;",
            &[],
        )?
        .l()?;
    let n = env.call_method(&list, "size", "()I", &[])?.i()?;
    (0..n)
        .map(|i| {
            env.call_method(&list, "get", "(I)Ljava/lang/Object;", &[JValue::Int(i)])?
                .l()
        })
        .collect()
}

fn global(jni: *mut JNIEnv, obj: &JObject<'_>) -> jobject {
    // SAFETY: `jni` is the calling thread's JNIEnv and `obj` a live local reference.
    unsafe { new_global_ref(jni, obj.as_raw()) }
}

/// A Java exception left by a failed call must not reach the JVM.
fn clear_exception(env: &mut jni::JNIEnv<'_>) {
    if env.exception_check().unwrap_or(false) {
        let _ = env.exception_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_beans_whose_last_collection_tells_the_heap_after_it() {
        for name in [
            "G1 Young Generation",
            "G1 Old Generation",
            "PS Scavenge",
            "ZGC Cycles",
            "ZGC Minor Cycles",
            "ZGC Major Cycles",
            "Shenandoah Cycles",
        ] {
            assert!(collects(name), "{name}");
        }
        for name in [
            "G1 Concurrent GC",
            "ZGC Pauses",
            "ZGC Major Pauses",
            "Shenandoah Pauses",
        ] {
            assert!(!collects(name), "{name}");
        }
    }

    #[test]
    fn the_beans_that_count_collections() {
        // G1 on JDK 17, and on JDK 20+ with the bean of the concurrent cycle's pauses.
        let g1 = names(&["G1 Young Generation", "G1 Old Generation"]);
        assert_eq!(counted_collectors(&g1), (vec![true, true], 1));
        let g1 = names(&[
            "G1 Young Generation",
            "G1 Concurrent GC",
            "G1 Old Generation",
        ]);
        assert_eq!(counted_collectors(&g1), (vec![true, false, true], 1));
        let parallel = names(&["PS Scavenge", "PS MarkSweep"]);
        assert_eq!(counted_collectors(&parallel), (vec![true, true], 1));
        // ZGC: cycles, not pauses; generational ZGC: major cycles.
        let z = names(&["ZGC Cycles", "ZGC Pauses"]);
        assert_eq!(counted_collectors(&z), (vec![true, false], 2));
        let gz = names(&[
            "ZGC Minor Cycles",
            "ZGC Minor Pauses",
            "ZGC Major Cycles",
            "ZGC Major Pauses",
        ]);
        assert_eq!(
            counted_collectors(&gz),
            (vec![false, false, true, false], 2)
        );
        let shen = names(&["Shenandoah Pauses", "Shenandoah Cycles"]);
        assert_eq!(counted_collectors(&shen), (vec![false, true], 2));
        // A collector named otherwise: every bean counts.
        let odd = names(&["Concurrent Thing"]);
        assert_eq!(counted_collectors(&odd), (vec![true], 1));
    }
}
