//! Symbol names as people read them: `StringTable::intern` for
//! `_ZN11StringTable6internEPKcP10JavaThread`, `std::io::stdio::_print` for Rust's.
//!
//! C++ names lose their parameter lists and return types (overloads then share one frame
//! name, as async-profiler shows them); Rust names lose their hash. A name that does not
//! demangle is shown as it is. The demanglers parse text from files the agent does not
//! control, so a panic inside one is caught and the mangled name kept.
#![forbid(unsafe_code)]

/// The readable form of `name`.
pub fn demangle(name: &str) -> String {
    std::panic::catch_unwind(|| readable(name)).unwrap_or_else(|_| name.to_owned())
}

fn readable(name: &str) -> String {
    if looks_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") {
        let options = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type()
            .recursion_limit(256);
        if let Ok(d) = cpp_demangle::Symbol::new(name)
            .map_err(|_| ())
            .and_then(|s| s.demangle_with_options(&options).map_err(|_| ()))
        {
            return d;
        }
    }
    name.to_owned()
}

/// Rust's v0 names (`_R…`) and its legacy ones, which are C++-like but end in a hash
/// segment (`…17h0123456789abcdefE`).
fn looks_rust(name: &str) -> bool {
    if name.starts_with("_R") {
        return true;
    }
    let Some(body) = name.strip_suffix('E') else {
        return false;
    };
    body.len() > 19 && {
        let (head, hash) = body.split_at(body.len() - 19);
        head.starts_with("_ZN")
            && hash.starts_with("17h")
            && hash[3..].bytes().all(|b| b.is_ascii_hexdigit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_rust_and_plain_names() {
        assert_eq!(
            demangle("_ZN11StringTable6internEPKcP10JavaThread"),
            "StringTable::intern"
        );
        assert_eq!(
            demangle("_ZN20G1ParScanThreadState23trim_queue_to_thresholdEj"),
            "G1ParScanThreadState::trim_queue_to_threshold"
        );
        assert_eq!(
            demangle("_ZN3std2io5stdio6_print17h1d8c3e2a4b5f6a7bE"),
            "std::io::stdio::_print"
        );
        assert_eq!(demangle("write"), "write");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        assert_eq!(demangle(""), "");
        // Deep nesting is cut off by the recursion limit, not the stack.
        let deep = format!("_Z{}", "PFv".repeat(10_000));
        assert_eq!(demangle(&deep), deep);
    }
}
