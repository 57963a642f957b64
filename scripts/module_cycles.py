#!/usr/bin/env python3
"""Lists import cycles between the modules of each Rust crate given, and fails on one.

    python3 scripts/module_cycles.py [CRATE_DIR...]     (default: every crate of the workspace)
    python3 scripts/module_cycles.py --self-test        (proves it finds the cycles it should)

Modules must form a tree of dependencies (a shared primitive lives in a leaf module that
imports none of its siblings), so that each folder can be read, tested and changed from the
leaves up. A module `a::x` that names `crate::b::y` makes `a` depend on `b`; the dependency
counts between the two siblings where the paths part (`a` and `b` here, or `a::x` and `a::z`
inside `a`). Paths are read from `crate::…`, `super::…` and `self::…`, including the braces of
grouped `use` lines; comments and string literals are ignored. Test modules count too: a test
that needs a cycle to compile is a design smell as well.
"""
import os
import re
import sys


def strip_comments_and_strings(text):
    """The code of a file with comments, string and char literals blanked out."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and text.startswith("'\\", i)):
            end = text.find("'", i + 2 if text.startswith("'\\", i) else i + 1)
            i = n if end < 0 else end + 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_group(text):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (names only, `as` dropped)."""
    paths = []

    def parse(prefix, s):
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in parts:
            part = part.strip()
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0:
                head = part[:brace].rstrip(":").strip()
                parse(prefix + ([head] if head else []), part[brace + 1:part.rfind("}")])
            else:
                name = part.split(" as ")[0].strip()
                paths.append("::".join(prefix + [name]))

    parse([], text)
    return paths


PATH = re.compile(r"(?<![\w$])(crate|super|self)((?:::\s*(?:\w+|\{))+)")


def references(code):
    """Every `crate::`/`super::`/`self::` path in the code, as (root, [segments])."""
    refs = []
    for m in PATH.finditer(code):
        root, rest = m.group(1), m.group(2)
        if rest.rstrip().endswith("{"):
            start = m.end() - 1
            depth, k = 0, start
            while k < len(code):
                if code[k] == "{":
                    depth += 1
                elif code[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            head = [s for s in re.split(r"::\s*", rest.rstrip("{").strip()) if s]
            for p in expand_group(code[start + 1:k]):
                refs.append((root, head + [s for s in p.split("::") if s]))
        else:
            refs.append((root, [s for s in re.split(r"::\s*", rest) if s]))
    return refs


def crate_modules(src):
    """Module path (tuple) -> (file, is_dir_module) for every .rs file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            is_dir = rel[-1] in ("mod", "lib", "main")
            if is_dir:
                rel = rel[:-1]
            mods[tuple(rel)] = (os.path.join(root, f), is_dir)
    return mods


def edges_of(src):
    mods = crate_modules(src)
    edges = {}
    for here, (path, is_dir) in mods.items():
        code = strip_comments_and_strings(open(path, encoding="utf-8", errors="replace").read())
        # `self` is the module itself; `super` its parent.
        for root, segs in references(code):
            if root == "crate":
                base = []
            elif root == "self":
                base = list(here)
            else:
                base = list(here[:-1])
                while segs and segs[0] == "super":
                    base, segs = base[:-1], segs[1:]
            full = tuple(base + segs)
            target = next((full[:k] for k in range(len(full), -1, -1) if full[:k] in mods), None)
            if target is None or target == here:
                continue
            i = 0
            while i < min(len(here), len(target)) and here[i] == target[i]:
                i += 1
            if i >= len(here) or i >= len(target):
                continue  # an ancestor or a descendant: not a sibling dependency
            edges.setdefault(here[:i + 1], set()).add(target[:i + 1])
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def self_test():
    """Cycles through each kind of path are found; a comment, a string or a tree are not."""
    import tempfile
    cases = {
        "crate paths": ({"a.rs": "use crate::b::X;", "b.rs": "fn f() { crate::a::g(); }"}, 1),
        "grouped use": ({"a.rs": "use crate::{b::{X, Y as Z}, c};", "b.rs": "use crate::a;", "c.rs": ""}, 1),
        "super in a folder": ({"m/mod.rs": "mod x; mod y;", "m/x.rs": "use super::y::T;", "m/y.rs": "use super::x::U;"}, 1),
        "self in a folder": ({"m/mod.rs": "use self::x::T;", "m/x.rs": "use crate::m::y;", "m/y.rs": "use super::x;"}, 1),
        "folders as a whole": ({"p/mod.rs": "", "p/a.rs": "use crate::q::b;", "q/mod.rs": "", "q/b.rs": "use crate::p::a;"}, 1),
        "a tree": ({"a.rs": "use crate::b;", "b.rs": "use crate::c;", "c.rs": ""}, 0),
        "comments and strings": ({"a.rs": "// crate::b\nconst S: &str = \"crate::b\";", "b.rs": "use crate::a;"}, 0),
        "ancestors": ({"m/mod.rs": "use self::x::T;", "m/x.rs": "use crate::m::U;"}, 0),
    }
    failed = 0
    for name, (files, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                path = os.path.join(d, "src", rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w").write(text)
            got = len(cycles(edges_of(os.path.join(d, "src"))))
            if got != want:
                print(f"self-test {name!r}: {got} cycles, expected {want}")
                failed += 1
    print(f"self-test: {len(cases) - failed} of {len(cases)} cases right")
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = argv or sorted(
        d for d in os.listdir(top)
        if os.path.isfile(os.path.join(top, d, "Cargo.toml")) and os.path.isdir(os.path.join(top, d, "src"))
    )
    found = 0
    for crate in crates:
        src = os.path.join(top, crate, "src") if not os.path.isabs(crate) else os.path.join(crate, "src")
        edges = edges_of(src)
        for comp in cycles(edges):
            found += 1
            names = ", ".join("::".join(m) for m in comp)
            links = "; ".join(
                f"{'::'.join(a)} -> {'::'.join(b)}"
                for a in comp for b in sorted(edges.get(a, ())) if b in comp
            )
            print(f"{crate}: cycle between {names} ({links})")
        n = sum(len(v) for v in edges.values())
        print(f"{crate}: {len({m for e in edges.items() for m in (e[0], *e[1])})} modules with sibling dependencies, {n} dependencies")
    print(f"module cycles: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
