//! The JVMTI types the generated function table refers to, written from `jvmti.h`.
#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

use jni::sys::{jboolean, jint, jlong, jmethodID, jobject};

pub(crate) type jthread = jobject;
pub(crate) type jthreadGroup = jobject;
pub(crate) type jlocation = jlong;
pub(crate) type jrawMonitorID = *mut c_void;
pub(crate) type JvmtiError = u32;
pub(crate) type JvmtiEvent = u32;

pub(crate) const JVMTI_VERSION_1_2: jint = 0x3001_0200;
pub(crate) const JVMTI_ENABLE: std::os::raw::c_int = 1;
pub(crate) const JVMTI_DISABLE: std::os::raw::c_int = 0;

/// `jvmtiCapabilities`: 128 one-bit fields, numbered by [`super::capability`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JvmtiCapabilities {
    words: [u32; 4],
}

impl JvmtiCapabilities {
    pub(crate) fn with(mut self, bit: u32) -> Self {
        if let Some(w) = self.words.get_mut((bit / 32) as usize) {
            *w |= 1 << (bit % 32);
        }
        self
    }

    pub(crate) fn has(&self, bit: u32) -> bool {
        self.words
            .get((bit / 32) as usize)
            .is_some_and(|w| w & (1 << (bit % 32)) != 0)
    }
}

#[repr(C)]
pub(crate) struct JvmtiThreadInfo {
    pub(crate) name: *mut c_char,
    pub(crate) priority: jint,
    pub(crate) is_daemon: jboolean,
    pub(crate) thread_group: jthreadGroup,
    pub(crate) context_class_loader: jobject,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct JvmtiLineNumberEntry {
    pub(crate) start_location: jlocation,
    pub(crate) line_number: jint,
}

#[repr(C)]
pub(crate) struct JvmtiFrameInfo {
    pub(crate) method: jmethodID,
    pub(crate) location: jlocation,
}

#[repr(C)]
pub(crate) struct JvmtiStackInfo {
    pub(crate) thread: jthread,
    pub(crate) state: jint,
    pub(crate) frame_buffer: *mut JvmtiFrameInfo,
    pub(crate) frame_count: jint,
}

#[repr(C)]
pub(crate) struct JvmtiAddrLocationMap {
    pub(crate) start_address: *const c_void,
    pub(crate) location: jlocation,
}

/// `jvmtiParamInfo`.
#[repr(C)]
pub(crate) struct JvmtiParamInfo {
    pub(crate) name: *mut c_char,
    pub(crate) kind: std::os::raw::c_int,
    pub(crate) base_type: std::os::raw::c_int,
    pub(crate) null_ok: jboolean,
}

/// `jvmtiExtensionEventInfo`.
#[repr(C)]
pub(crate) struct JvmtiExtensionEventInfo {
    pub(crate) extension_event_index: jint,
    pub(crate) id: *mut c_char,
    pub(crate) short_description: *mut c_char,
    pub(crate) param_count: jint,
    pub(crate) params: *mut JvmtiParamInfo,
}
