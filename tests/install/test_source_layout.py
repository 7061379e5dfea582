"""The Rust sources' shape: no two files that `use` each other, directly or
around a loop, in the core or the binding (a decision has one home, and a
reader can follow the layers one way)."""

from __future__ import annotations

import pathlib
import re

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"


def _modules() -> dict[tuple[str, ...], pathlib.Path]:
    out = {}
    for path in SRC.rglob("*.rs"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        out[tuple(parts)] = path
    return out


def _code(path: pathlib.Path) -> str:
    """The file without comments and without its inline test module."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    cut = text.find("#[cfg(test)]\nmod tests")
    return text if cut < 0 else text[:cut]


def _edges() -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    mods = _modules()

    def resolve(segments: list[str]) -> tuple[str, ...] | None:
        for n in range(len(segments), 0, -1):
            if tuple(segments[:n]) in mods:
                return tuple(segments[:n])
        return None

    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in mods}
    for mod, path in mods.items():
        if path.name.endswith("_tests.rs"):
            continue
        code = _code(path)
        is_mod = path.name in ("mod.rs", "lib.rs")
        parent = list(mod if is_mod else mod[:-1])
        for m in re.finditer(r"\b(crate|super)((?:::\w+)+)(::\{([^;]*?)\})?", code):
            base, rest, _, brace = m.groups()
            start = [] if base == "crate" else list(mod[:-1])
            segments = rest.strip(":").split("::")
            candidates = [start + segments]
            if brace:
                candidates += [start + segments + [item] for item in re.findall(r"(\w+)", brace)]
            for c in candidates:
                target = resolve(c)
                if target is not None and target != mod and list(target) != start:
                    edges[mod].add(target)
        if is_mod:
            # `use child::...` in a mod.rs: the parent depends on its child.
            for m in re.finditer(r"\buse (\w+)::", code):
                child = (*parent, m.group(1))
                if child in mods:
                    edges[mod].add(child)
        if re.search(r"\buse super::\*", code):
            edges[mod].add(tuple(mod[:-1]))
    return edges


def _cycles(edges: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index: dict[tuple[str, ...], int] = {}
    low: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []
    on: set[tuple[str, ...]] = set()
    found: list[list[str]] = []

    def visit(v: tuple[str, ...]) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append("::".join(w))
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_no_two_rust_files_use_each_other() -> None:
    assert _cycles(_edges()) == []


def test_the_check_sees_a_loop() -> None:
    edges = {("a",): {("b",)}, ("b",): {("c",)}, ("c",): {("a",)}, ("d",): set()}
    assert _cycles(edges) == [["a", "b", "c"]]
