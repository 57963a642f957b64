pub mod alloc;
pub mod locks;
pub mod parks;
pub mod wall;
