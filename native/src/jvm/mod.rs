//! The JVM side, none of it reached from the signal handler: JVMTI and JNI calls
//! ([`jvmti`]), finding AsyncGetCallTrace ([`agct`]) and libjvm's own symbols ([`libjvm`]),
//! naming frames from jmethodIDs ([`symbols`]) and classes for leaf frames ([`class_names`]).
//! The C declarations they call are in [`crate::sys`].

pub(crate) mod agct;
pub(crate) mod class_names;
pub(crate) mod jvmti;
pub(crate) mod libjvm;
pub(crate) mod symbols;
