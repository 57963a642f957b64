pub(crate) mod agct;
pub(crate) mod class_names;
pub(crate) mod jvmti;
pub(crate) mod libjvm;
pub(crate) mod symbols;
