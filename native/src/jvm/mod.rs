//! The JVM side, none of it reached from the signal handler: JVMTI and JNI calls
//! ([`jvmti`]), finding AsyncGetCallTrace ([`agct`]) and libjvm's own symbols ([`libjvm`]),
//! naming frames from jmethodIDs ([`symbols`]) and classes for leaf frames ([`class_names`]);
//! the collector and heap figures of the management beans ([`management`]);
//! what is HotSpot's alone, outside any API ([`hotspot`]: which kernel thread and JNIEnv a
//! running Java thread has).
//! The C declarations they call are in [`crate::sys`].

pub(crate) mod agct;
pub(crate) mod class_names;
pub(crate) mod hotspot;
pub(crate) mod jvmti;
pub(crate) mod libjvm;
pub(crate) mod management;
pub(crate) mod symbols;
