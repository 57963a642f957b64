//! Profile ids for OTLP export.

use otel_bridge::otlp::ProfileId;
use otelprof_primitives::rng::SplitMix64;

/// Profile ids: random (getrandom) when the OS provides randomness, else the workspace's
/// generator seeded with the process's hash seed; never all zero (a number and its
/// complement are never both zero).
pub(crate) struct ProfileIdSource {
    fallback: SplitMix64,
}

impl ProfileIdSource {
    pub(crate) fn new() -> ProfileIdSource {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        ProfileIdSource {
            fallback: SplitMix64(h.finish()),
        }
    }

    pub(crate) fn next(&mut self) -> ProfileId {
        let mut b = [0u8; 16];
        if getrandom::fill(&mut b).is_err() {
            let x = self.fallback.next_u64();
            b[..8].copy_from_slice(&x.to_le_bytes());
            b[8..].copy_from_slice(&(!x).to_le_bytes());
        }
        ProfileId::from_random(b)
    }
}
