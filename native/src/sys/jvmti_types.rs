//! The JVMTI types the generated function table refers to, written from `jvmti.h`.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

use jni::sys::{jboolean, jint, jlong, jmethodID, jobject};

pub type jthread = jobject;
pub type jthreadGroup = jobject;
pub type jlocation = jlong;
pub type jrawMonitorID = *mut c_void;
pub type JvmtiError = u32;
pub type JvmtiEvent = u32;

pub const JVMTI_VERSION_1_2: jint = 0x3001_0200;
pub const JVMTI_ENABLE: std::os::raw::c_int = 1;
pub const JVMTI_DISABLE: std::os::raw::c_int = 0;

/// `jvmtiCapabilities`: 128 one-bit fields, numbered by [`super::capability`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JvmtiCapabilities {
    words: [u32; 4],
}

impl JvmtiCapabilities {
    pub fn with(mut self, bit: u32) -> Self {
        if let Some(w) = self.words.get_mut((bit / 32) as usize) {
            *w |= 1 << (bit % 32);
        }
        self
    }

    pub fn has(&self, bit: u32) -> bool {
        self.words
            .get((bit / 32) as usize)
            .is_some_and(|w| w & (1 << (bit % 32)) != 0)
    }
}

#[repr(C)]
pub struct JvmtiThreadInfo {
    pub name: *mut c_char,
    pub priority: jint,
    pub is_daemon: jboolean,
    pub thread_group: jthreadGroup,
    pub context_class_loader: jobject,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct JvmtiLineNumberEntry {
    pub start_location: jlocation,
    pub line_number: jint,
}

#[repr(C)]
pub struct JvmtiFrameInfo {
    pub method: jmethodID,
    pub location: jlocation,
}

#[repr(C)]
pub struct JvmtiStackInfo {
    pub thread: jthread,
    pub state: jint,
    pub frame_buffer: *mut JvmtiFrameInfo,
    pub frame_count: jint,
}

#[repr(C)]
pub struct JvmtiAddrLocationMap {
    pub start_address: *const c_void,
    pub location: jlocation,
}

/// `jvmtiParamInfo`.
#[repr(C)]
pub struct JvmtiParamInfo {
    pub name: *mut c_char,
    pub kind: std::os::raw::c_int,
    pub base_type: std::os::raw::c_int,
    pub null_ok: jboolean,
}

/// `jvmtiExtensionEventInfo`.
#[repr(C)]
pub struct JvmtiExtensionEventInfo {
    pub extension_event_index: jint,
    pub id: *mut c_char,
    pub short_description: *mut c_char,
    pub param_count: jint,
    pub params: *mut JvmtiParamInfo,
}
