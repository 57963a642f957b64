//! Naming rules for JVM frames.
//!
//! A frame is named `package.Class.method`, the form Java programmers read in stack traces and
//! the one pprof tools and Pyroscope group by. The JVM hands the agent class *signatures*
//! (`Lcom/foo/Bar;`, JVMS §4.3.2,
//! <https://docs.oracle.com/javase/specs/jvms/se21/html/jvms-4.html#jvms-4.3.2>) and, for
//! runtime-generated classes, names that embed per-run addresses and counters. Those are
//! removed here so that the same code gets the same name in every run and on every JVM, which
//! is what makes profiles from different runs comparable (diffs, merges, a backend's series).

use std::borrow::Cow;

/// Java name of the type a JVM type signature denotes: `Lcom/foo/Bar;` → `com.foo.Bar`,
/// `[I` → `int[]`, `[[Ljava/lang/String;` → `java.lang.String[][]`.
///
/// Input that is not a signature is returned best-effort: an internal name `com/foo/Bar`
/// becomes `com.foo.Bar`, a Java name passes through unchanged. Never panics.
pub fn class_name_from_signature(sig: &str) -> String {
    let element = sig.trim_start_matches('[');
    let dims = sig.len() - element.len();
    let base: Cow<'_, str> = match element {
        "B" => "byte".into(),
        "C" => "char".into(),
        "D" => "double".into(),
        "F" => "float".into(),
        "I" => "int".into(),
        "J" => "long".into(),
        "S" => "short".into(),
        "Z" => "boolean".into(),
        "V" => "void".into(),
        _ => {
            let internal = element
                .strip_prefix('L')
                .and_then(|s| s.strip_suffix(';'))
                .unwrap_or(element);
            internal.replace('/', ".").into()
        }
    };
    let mut name = String::with_capacity(base.len() + 2 * dims);
    name.push_str(&base);
    for _ in 0..dims {
        name.push_str("[]");
    }
    name
}

/// `name` without the parts that differ between runs of the same code:
///
/// - hidden-class addresses (JDK 15+): `Foo$$Lambda/0x0000000800c01234` → `Foo$$Lambda`. The
///   separator is `/` in `Class.getName()`, `.` in JVMTI `GetClassSignature` (HotSpot's
///   `signature_name()` turns the internal `+` into `.`), and `+` internally; all three are
///   handled. JDK 8's VM-anonymous classes carry a decimal hash instead (`Foo$$Lambda$1/123`).
/// - lambda counters: `Foo$$Lambda$123` (JDK ≤ 20) → `Foo$$Lambda` (the JDK 21+ form);
/// - proxy counters: `jdk.proxy2.$Proxy12` → `jdk.proxy2.$Proxy`;
/// - reflection accessor counters: `jdk.internal.reflect.GeneratedMethodAccessor42` →
///   `…GeneratedMethodAccessor` (also `GeneratedConstructorAccessor`,
///   `GeneratedSerializationConstructorAccessor`, and `sun.reflect` on JDK 8).
///
/// Array suffixes (`[]`) are kept. Borrows when nothing changes, and also when the change is a
/// plain truncation (the common case), so the hot path allocates only for arrays of generated
/// classes.
pub fn normalize_class_name(name: &str) -> Cow<'_, str> {
    let element = name.trim_end_matches("[]");
    let mut kept = element;
    kept = strip_hidden_class_suffix(kept);
    kept = strip_generated_counter(kept);
    if kept.len() == element.len() {
        Cow::Borrowed(name)
    } else if element.len() == name.len() {
        Cow::Borrowed(kept)
    } else {
        let mut owned = String::with_capacity(kept.len() + name.len() - element.len());
        owned.push_str(kept);
        owned.push_str(&name[element.len()..]);
        Cow::Owned(owned)
    }
}

/// `com.foo.Bar.method` from a class signature and a method name.
pub fn function_name(class_signature: &str, method: &str) -> String {
    let class = class_name_from_signature(class_signature);
    let class = normalize_class_name(&class);
    let mut name = String::with_capacity(class.len() + 1 + method.len());
    name.push_str(&class);
    name.push('.');
    name.push_str(method);
    name
}

/// Removes a trailing `/0x<hex>`, `.0x<hex>`, `+0x<hex>` or `/<decimal>`-style suffix. A Java
/// identifier cannot start with a digit, so such a last segment is never part of a real name.
fn strip_hidden_class_suffix(name: &str) -> &str {
    let Some(sep) = name.rfind(['/', '.', '+']) else {
        return name;
    };
    let suffix = &name[sep + 1..];
    let is_address = suffix
        .strip_prefix("0x")
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    let is_decimal = !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit());
    if sep > 0 && (is_address || is_decimal) {
        &name[..sep]
    } else {
        name
    }
}

/// Class-name endings followed by a per-run counter, kept without the counter.
const COUNTED_SUFFIXES: [&str; 5] = [
    "$$Lambda$",
    "$Proxy",
    "GeneratedMethodAccessor",
    "GeneratedConstructorAccessor",
    "GeneratedSerializationConstructorAccessor",
];

fn strip_generated_counter(name: &str) -> &str {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return name;
    }
    let head = &name[..name.len() - digits];
    for suffix in COUNTED_SUFFIXES {
        if head.ends_with(suffix) {
            // `Foo$$Lambda$12` → `Foo$$Lambda`: the `$` before a lambda counter goes too.
            return match suffix.strip_suffix('$') {
                Some(_) => &head[..head.len() - 1],
                None => head,
            };
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_become_java_names() {
        let cases = [
            ("Lcom/foo/Bar;", "com.foo.Bar"),
            ("Ljava/util/HashMap$Node;", "java.util.HashMap$Node"),
            ("[I", "int[]"),
            ("[[Ljava/lang/String;", "java.lang.String[][]"),
            ("[[[J", "long[][][]"),
            ("Z", "boolean"),
            ("V", "void"),
            ("LFoo;", "Foo"),
            // Best effort on things that are not signatures.
            ("com/foo/Bar", "com.foo.Bar"),
            ("com.foo.Bar", "com.foo.Bar"),
            ("Lcom/foo/Bar", "Lcom.foo.Bar"),
            ("L;", ""),
            ("", ""),
            ("[", "[]"),
            ("[[", "[][]"),
            ("[Lé/ü;", "é.ü[]"),
        ];
        for (sig, want) in cases {
            assert_eq!(class_name_from_signature(sig), want, "{sig}");
        }
    }

    #[test]
    fn generated_names_lose_their_per_run_parts() {
        let cases = [
            // JDK 17 lambdas, as Class.getName() and as JVMTI GetClassSignature shows them.
            (
                "com.foo.Bar$$Lambda$123/0x0000000800c01234",
                "com.foo.Bar$$Lambda",
            ),
            (
                "com.foo.Bar$$Lambda$123.0x0000000800c01234",
                "com.foo.Bar$$Lambda",
            ),
            // JDK 21+ lambdas (no counter), JDK 25 addresses.
            (
                "com.foo.Bar$$Lambda/0x000071c8d4001c00",
                "com.foo.Bar$$Lambda",
            ),
            (
                "com.foo.Bar$$Lambda.0x000071c8d4001c00",
                "com.foo.Bar$$Lambda",
            ),
            (
                "com.foo.Bar$Inner$$Lambda+0x00007f3a1c0a2b48",
                "com.foo.Bar$Inner$$Lambda",
            ),
            // JDK 8 VM-anonymous lambda classes.
            ("com.foo.Bar$$Lambda$1/1831932724", "com.foo.Bar$$Lambda"),
            // Method-handle plumbing.
            (
                "java.lang.invoke.LambdaForm$MH/0x0000000800c0d000",
                "java.lang.invoke.LambdaForm$MH",
            ),
            (
                "java.lang.invoke.LambdaForm$DMH.0x000071c8d4010800",
                "java.lang.invoke.LambdaForm$DMH",
            ),
            // Proxies.
            ("jdk.proxy2.$Proxy12", "jdk.proxy2.$Proxy"),
            ("com.sun.proxy.$Proxy0", "com.sun.proxy.$Proxy"),
            // Reflection accessors (JDK 17; JDK 18+ use method handles instead).
            (
                "jdk.internal.reflect.GeneratedMethodAccessor42",
                "jdk.internal.reflect.GeneratedMethodAccessor",
            ),
            (
                "jdk.internal.reflect.GeneratedConstructorAccessor7",
                "jdk.internal.reflect.GeneratedConstructorAccessor",
            ),
            (
                "jdk.internal.reflect.GeneratedSerializationConstructorAccessor3",
                "jdk.internal.reflect.GeneratedSerializationConstructorAccessor",
            ),
            (
                "sun.reflect.GeneratedMethodAccessor1",
                "sun.reflect.GeneratedMethodAccessor",
            ),
            // Arrays keep their dimensions.
            (
                "com.foo.Bar$$Lambda.0x000071c8d4001c00[][]",
                "com.foo.Bar$$Lambda[][]",
            ),
            ("jdk.proxy2.$Proxy12[]", "jdk.proxy2.$Proxy[]"),
        ];
        for (name, want) in cases {
            assert_eq!(normalize_class_name(name), want, "{name}");
        }
    }

    #[test]
    fn ordinary_names_are_borrowed_unchanged() {
        for name in [
            "java.lang.Thread",
            "java.util.concurrent.ThreadPoolExecutor$Worker",
            "com.foo.Bar$1",
            "com.foo.Bar$Inner2",
            "com.foo.Version2",
            "org.h2.Driver",
            "java.lang.invoke.BoundMethodHandle$Species_LL",
            "jdk.internal.reflect.DirectMethodHandleAccessor",
            "jdk.proxy2.$Proxy",
            "com.foo.$$Lambda",
            "int[]",
            "",
            "/0x12",
            "0x",
            "a.0x",
            "a.0xg1",
        ] {
            let normalized = normalize_class_name(name);
            assert!(matches!(normalized, Cow::Borrowed(_)), "{name}");
            assert_eq!(normalized, name);
        }
        // A truncation still borrows.
        assert!(matches!(
            normalize_class_name("jdk.proxy2.$Proxy12"),
            Cow::Borrowed("jdk.proxy2.$Proxy")
        ));
    }

    #[test]
    fn function_names_from_jvmti_signatures() {
        let cases = [
            (
                "Lcom/example/Shop;",
                "checkout",
                "com.example.Shop.checkout",
            ),
            (
                "Ljava/util/concurrent/ThreadPoolExecutor$Worker;",
                "run",
                "java.util.concurrent.ThreadPoolExecutor$Worker.run",
            ),
            // JDK 17 hidden lambda class, as GetClassSignature reports it.
            (
                "Lcom/example/Shop$$Lambda$14.0x0000000800c0a448;",
                "apply",
                "com.example.Shop$$Lambda.apply",
            ),
            // JDK 25.
            (
                "Lcom/example/Shop$$Lambda.0x00007f2e1c001a28;",
                "apply",
                "com.example.Shop$$Lambda.apply",
            ),
            (
                "Ljava/lang/invoke/LambdaForm$MH.0x00007f2e1c00c400;",
                "invoke",
                "java.lang.invoke.LambdaForm$MH.invoke",
            ),
            ("Ljdk/proxy1/$Proxy5;", "handle", "jdk.proxy1.$Proxy.handle"),
            ("[I", "clone", "int[].clone"),
            ("Ljava/lang/Object;", "<init>", "java.lang.Object.<init>"),
        ];
        for (sig, method, want) in cases {
            assert_eq!(function_name(sig, method), want, "{sig} {method}");
        }
    }
}
