//! Class names for the leaf frame of allocation and lock samples, interned to small ids.
//!
//! A sample record has room for a number, not a string, and the JVMTI callbacks that record
//! them run on application threads, many times a second. So each class is named once: the
//! first time it is seen its signature is read and interned, and the id is stored as the
//! class's JVMTI tag (tags belong to our environment and die with the class). Later samples
//! of the class cost one GetTag. Names follow the frame naming rules (`byte[]`,
//! `java.lang.String`, hidden-class suffixes removed).
//!
//! Memory is bounded: past [`MAX_NAMES`] distinct names, further classes share one
//! `[other class]` entry (and are not tagged, so each costs a signature read).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jni::sys::jclass;
use otel_bridge::frame_name;

use crate::jvm::jvmti::Jvmti;

pub(crate) const MAX_NAMES: usize = 1 << 16;
/// Id of the shared entry for classes beyond [`MAX_NAMES`].
pub(crate) const OTHER: u32 = 1;
/// Id of classes whose name could not be read.
pub(crate) const UNKNOWN: u32 = 2;

pub(crate) struct ClassNames {
    inner: Mutex<Names>,
}

struct Names {
    ids: Option<HashMap<Arc<str>, u32>>,
    names: Vec<Arc<str>>,
}

impl ClassNames {
    pub(crate) const fn new() -> ClassNames {
        ClassNames {
            inner: Mutex::new(Names {
                ids: None,
                names: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Names> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The id of `name` (a Java class name), interning it. Ids start at 3; see [`OTHER`].
    pub(crate) fn intern(&self, name: &str) -> u32 {
        let mut n = self.lock();
        if n.names.is_empty() {
            n.names = vec!["".into(), "[other class]".into(), "[unknown class]".into()];
        }
        if let Some(&id) = n.ids.as_ref().and_then(|ids| ids.get(name)) {
            return id;
        }
        if n.names.len() >= MAX_NAMES {
            return OTHER;
        }
        let id = n.names.len() as u32;
        let shared: Arc<str> = name.into();
        n.names.push(shared.clone());
        n.ids.get_or_insert_with(HashMap::new).insert(shared, id);
        id
    }

    /// The name behind `id` (None for 0 and unknown ids).
    pub(crate) fn name(&self, id: u32) -> Option<Arc<str>> {
        if id == 0 {
            return None;
        }
        let n = self.lock();
        match n.names.get(id as usize) {
            Some(name) => Some(name.clone()),
            None if id == OTHER => Some("[other class]".into()),
            None if id == UNKNOWN => Some("[unknown class]".into()),
            None => None,
        }
    }
}

impl Default for ClassNames {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) static CLASSES: ClassNames = ClassNames::new();

/// The id of `class`'s name. Not for signal handlers (JVMTI calls, a mutex on first sight).
///
/// # Safety
/// `class` is a live JNI reference to a class, on a thread attached to the VM.
pub(crate) unsafe fn class_id(jvmti: &Jvmti, class: jclass) -> u32 {
    if class.is_null() {
        return UNKNOWN;
    }
    // SAFETY: per this function's contract.
    if let Ok(tag) = unsafe { jvmti.tag(class) } {
        if tag > 0 && tag <= u32::MAX as i64 {
            return tag as u32;
        }
    }
    // SAFETY: per this function's contract.
    let Ok(signature) = (unsafe { jvmti.class_signature(class) }) else {
        return UNKNOWN;
    };
    let name = frame_name::class_name_from_signature(&signature);
    let id = CLASSES.intern(&frame_name::normalize_class_name(&name));
    if id != OTHER {
        // SAFETY: per this function's contract. Failing to tag only costs the next lookup.
        let _ = unsafe { jvmti.set_tag(class, i64::from(id)) };
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_and_bounds() {
        let c = ClassNames::new();
        let a = c.intern("byte[]");
        assert!(a > UNKNOWN);
        assert_eq!(c.intern("byte[]"), a);
        let b = c.intern("java.lang.String");
        assert_ne!(a, b);
        assert_eq!(c.name(a).as_deref(), Some("byte[]"));
        assert_eq!(c.name(0), None);
        assert_eq!(c.name(OTHER).as_deref(), Some("[other class]"));
        assert_eq!(c.name(UNKNOWN).as_deref(), Some("[unknown class]"));
        for i in 0..MAX_NAMES {
            c.intern(&format!("C{i}"));
        }
        assert_eq!(c.intern("one.too.Many"), OTHER);
        assert_eq!(c.intern("byte[]"), a, "known names keep their ids");
        assert_eq!(c.lock().names.len(), MAX_NAMES);
    }
}
