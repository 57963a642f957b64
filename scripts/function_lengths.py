#!/usr/bin/env python3
"""Lists the production Rust functions longer than a limit, longest first.

Usage: python3 scripts/function_lengths.py [LIMIT=100] [ROOT=.]

A function runs from its `fn` line to the closing brace at the same indentation. Skipped:
`target/`, `.git/`, `node_modules/`, `tests/` and `benches/` directories, and everything from
a file's `#[cfg(test)]` on (the test module closes a file by convention here). A scan by
indentation, not a parser: rustfmt's layout is what it relies on.
"""
import os
import re
import sys

FN = re.compile(
    r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)'
)
SKIPPED = ("target", ".git", "node_modules", "tests", "benches")


def functions(path):
    """(length, first line, name) of each function of the file at `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
            return
        m = FN.match(lines[i])
        if m:
            indent, name = len(m.group(1)), m.group(8)
            j = i
            while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and "{" in lines[j]:
                k = j + 1
                while k < len(lines) and not re.match("^" + " " * indent + r"\}", lines[k]):
                    k += 1
                yield k - i + 1, i + 1, name
        i += 1


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    root = sys.argv[2] if len(sys.argv) > 2 else "."
    rows = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED]
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                rows += [(n, path, line, f) for n, line, f in functions(path) if n > limit]
    for n, path, line, name in sorted(rows, reverse=True):
        print(f"{n:5d} {path}:{line} {name}")
    print(f"{len(rows)} functions over {limit} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
