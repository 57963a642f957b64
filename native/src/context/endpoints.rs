//! Endpoints: the name of a sample's local root span, bound when the profile is written.
//!
//! Instrumentation often renames a local root span after it starts (`GET` becomes
//! `GET /owners/{id}` once routing is done). So the record carries only the local root span id;
//! the shim reports `local root -> name` as it learns it (and again when the local root's scope
//! closes), and the aggregator applies the latest name when it writes the profile.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::Mutex;

/// `local root span id -> endpoint name`, as reported by the shim (for local roots that
/// were sampled). Names are interned: a service has few endpoints and many requests.
///
/// Memory is bounded by generations: reports go to the current generation; when the profile
/// is written ([`Endpoints::expire`]) or the current generation is full, it becomes the
/// previous one and the one before is dropped. A name therefore lives at least one profile
/// period after its last report, which is all the aggregator needs.
pub(crate) struct Endpoints {
    inner: Mutex<EndpointMaps>,
}

struct EndpointMaps {
    current: Option<HashMap<u64, u32>>,
    previous: Option<HashMap<u64, u32>>,
    names: Vec<std::sync::Arc<str>>,
    ids: Option<HashMap<std::sync::Arc<str>, u32>>,
}

const GENERATION_LIMIT: usize = 1 << 18;
const MAX_NAMES: usize = 1 << 16;

impl Endpoints {
    pub(crate) const fn new() -> Endpoints {
        Endpoints {
            inner: Mutex::new(EndpointMaps {
                current: None,
                previous: None,
                names: Vec::new(),
                ids: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EndpointMaps> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn report(&self, local_root: u64, name: &str) {
        if local_root == 0 {
            return;
        }
        let mut m = self.lock();
        let ids = m.ids.get_or_insert_with(HashMap::new);
        let id = match ids.get(name) {
            Some(&id) => id,
            None => {
                if ids.len() >= MAX_NAMES {
                    return; // a name per request is a bug upstream; do not grow without bound
                }
                let id = m.names.len() as u32;
                let shared: std::sync::Arc<str> = name.into();
                m.names.push(shared.clone());
                m.ids.get_or_insert_with(HashMap::new).insert(shared, id);
                id
            }
        };
        if m.current
            .as_ref()
            .is_some_and(|c| c.len() >= GENERATION_LIMIT)
        {
            m.rotate();
        }
        m.current
            .get_or_insert_with(HashMap::new)
            .insert(local_root, id);
    }

    /// The latest name of `local_root`.
    pub(crate) fn name(&self, local_root: u64) -> Option<String> {
        let m = self.lock();
        let id = m
            .current
            .as_ref()
            .and_then(|c| c.get(&local_root))
            .or_else(|| m.previous.as_ref().and_then(|p| p.get(&local_root)))?;
        m.names.get(*id as usize).map(|n| n.to_string())
    }

    /// Starts a new generation (called after each profile is written).
    pub(crate) fn expire(&self) {
        self.lock().rotate();
    }
}

impl EndpointMaps {
    fn rotate(&mut self) {
        self.previous = self.current.take();
    }
}

impl Default for Endpoints {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) static ENDPOINTS: Endpoints = Endpoints::new();

/// W3C span ids are 8 bytes; the shim passes them as the `long` whose big-endian bytes they
/// are (what `Long.parseUnsignedLong(hex, 16)` gives).
pub(crate) fn span_id_hex(id: u64) -> String {
    format!("{id:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_the_latest_name() {
        let e = Endpoints::new();
        e.report(7, "GET");
        e.report(7, "GET /owners/{id}");
        e.report(0, "ignored");
        assert_eq!(e.name(7).as_deref(), Some("GET /owners/{id}"));
        assert_eq!(e.name(8), None);
        // Survives one generation change, not two.
        e.expire();
        assert_eq!(e.name(7).as_deref(), Some("GET /owners/{id}"));
        e.report(9, "GET /owners/{id}");
        e.expire();
        assert_eq!(e.name(7), None);
        assert_eq!(e.name(9).as_deref(), Some("GET /owners/{id}"));
        // Many roots, few names: the generation limit bounds memory without a scan.
        for root in 1..=(GENERATION_LIMIT as u64 * 3) {
            e.report(root, if root % 2 == 0 { "a" } else { "b" });
        }
        assert_eq!(e.lock().names.len(), 4, "GET, GET /owners/{{id}}, a, b");
        assert_eq!(e.name(GENERATION_LIMIT as u64 * 3).as_deref(), Some("a"));
        assert_eq!(
            e.name(GENERATION_LIMIT as u64 * 3 - 1).as_deref(),
            Some("b")
        );
        assert_eq!(span_id_hex(0xb7ad6b7169203331), "b7ad6b7169203331");
    }
}
