pub mod agct;
pub mod class_names;
pub mod jvmti;
pub mod libjvm;
pub mod symbols;
