pub(crate) mod alloc;
pub(crate) mod locks;
pub(crate) mod parks;
pub(crate) mod wall;
