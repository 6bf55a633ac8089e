#!/usr/bin/env python3
"""Finds import cycles between the modules of each workspace crate.

An edge A -> B means a `use` line (or a `crate::`/`super::` path) in module A names
an item that is *defined* in module B; re-exports (`pub use`) are followed to the
defining module, so a parent that re-exports its children does not make a cycle by
itself. Test modules (`#[cfg(test)] mod tests`, files under `tests/`) are ignored:
they may reach anywhere. Exits 1 and prints each cycle when one exists.

Why a script and not `cargo modules dependencies --acyclic`: that tool builds
rust-analyzer (a long build on this two-core machine) and CI would have to install
it; the `use` lines of this workspace are regular enough to read directly.
"""
import os
import re
import sys

ITEM_RE = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|const\s+|unsafe\s+|extern\s+\"C\"\s+)*"
    r"(?:struct|enum|fn|trait|type|const|static|union|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MOD_RE = re.compile(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)


def strip_tests(text):
    """Drops `#[cfg(test)] mod name { ... }` blocks and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    pattern = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{")
    while True:
        m = pattern.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        i = j
    return "".join(out)


def crate_modules(src):
    """Maps module path (tuple) -> source text, following `mod x;` from lib.rs/main.rs."""
    modules = {}
    roots = [f for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f))]
    if not roots:
        return modules

    def visit(path, file, directory):
        with open(file, encoding="utf-8") as f:
            text = strip_tests(f.read())
        modules[path] = text
        for name in MOD_RE.findall(text):
            for candidate, child_dir in (
                (os.path.join(directory, name + ".rs"), os.path.join(directory, name)),
                (os.path.join(directory, name, "mod.rs"), os.path.join(directory, name)),
            ):
                if os.path.exists(candidate):
                    visit(path + (name,), candidate, child_dir)
                    break

    visit((), os.path.join(src, roots[0]), src)
    return modules


def use_paths(text):
    """Yields every path named by `use` trees and by inline `crate::`/`super::` paths."""
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        yield from expand_tree(m.group(1).strip())
    for m in re.finditer(r"(?<![:\w])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
        yield m.group(1)


def expand_tree(tree):
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        yield re.sub(r"\bas\w+$", "", tree.split(" as ")[0]) if " as " in tree else tree.split("as")[0] if False else tree
        return
    prefix, inner = m.group(1), m.group(2)
    depth, start = 0, 0
    parts = []
    for i, c in enumerate(inner):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    for p in parts:
        if p:
            yield from expand_tree(prefix + "::" + p if p != "self" else prefix)


def resolve(modules, current, path, seen=None):
    """Returns the module that defines the item `path` names, or None if external."""
    segs = path.split("::")
    segs = [re.sub(r"as[A-Za-z_0-9]+$", "", s) if False else s for s in segs]
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = current
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        rest = segs
    else:
        return None
    mod = base
    while rest and (mod + (rest[0],)) in modules:
        mod = mod + (rest[0],)
        rest = rest[1:]
    if not rest or rest[0] == "*":
        return mod
    name = rest[0]
    seen = seen or set()
    if (mod, name) in seen:
        return mod
    seen.add((mod, name))
    text = modules.get(mod, "")
    if name in ITEM_RE.findall(text):
        return mod
    # Follow a re-export of the name to where it is defined.
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
        for p in expand_tree(m.group(1).strip()):
            tail = p.split("::")[-1]
            if tail == name or p.endswith(" as " + name):
                target = resolve(modules, mod, p if p.split("::")[0] in ("crate", "super", "self") else "self::" + p, seen)
                if target is not None:
                    return target
    return mod


def cycles(modules):
    edges = {m: set() for m in modules}
    for mod, text in modules.items():
        for p in use_paths(text):
            target = resolve(modules, mod, p)
            if target is not None and target != mod and not is_ancestor(target, mod) and not is_ancestor(mod, target):
                edges[mod].add(target)
    return [c for c in tarjan(edges) if len(c) > 1], edges


def is_ancestor(a, b):
    return len(a) < len(b) and b[: len(a)] == a


def tarjan(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            strong(v)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = False
    for crate in sorted(os.listdir(os.path.join(root, "crates"))):
        src = os.path.join(root, "crates", crate, "src")
        modules = crate_modules(src)
        comps, edges = cycles(modules)
        for comp in comps:
            found = True
            names = sorted("::".join(m) or "(root)" for m in comp)
            print(f"{crate}: import cycle between {', '.join(names)}")
            members = set(comp)
            for m in sorted(comp):
                for t in sorted(edges[m] & members):
                    print(f"    {'::'.join(m) or '(root)'} -> {'::'.join(t) or '(root)'}")
    if not found:
        print("no import cycles inside any crate")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
