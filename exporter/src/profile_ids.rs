//! Profile ids for OTLP export.

use otel_bridge::otlp::ProfileId;

/// Profile ids: random (getrandom) when the OS provides randomness, else a counter mixed
/// with the process's hash seed; never all zero.
pub(crate) struct ProfileIdSource {
    fallback: u64,
}

impl ProfileIdSource {
    pub(crate) fn new() -> ProfileIdSource {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        ProfileIdSource {
            fallback: h.finish(),
        }
    }

    pub(crate) fn next(&mut self) -> ProfileId {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            self.fallback = self
                .fallback
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b[..8].copy_from_slice(&self.fallback.to_le_bytes());
            b[8..].copy_from_slice(&(!self.fallback).to_le_bytes());
        }
        ProfileId::from_random(b)
    }
}
