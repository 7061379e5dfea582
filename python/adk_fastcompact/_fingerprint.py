"""Fingerprints of google-adk's code, read from its source files.

A behaviour family is recognised by what google-adk's functions say, not by
its version string. The fingerprint of a module-level function is a hash of
its syntax tree (docstrings, comments, layout and line numbers left out) and
of every module-level definition it reaches by name in the same module (the
helpers it calls, the constants it reads), each hashed on its own so a
changed helper can be named. Source files are parsed, never imported: a
fingerprint can be taken of any google-adk release, and the same text gives
the same hash on every CPython this package supports (fields a newer `ast`
adds empty are left out).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Iterable, Iterator

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def canonical(node: ast.AST) -> str:
    """A text of `node`'s syntax, independent of layout and CPython version."""
    out: list[str] = []
    _write(node, out)
    return "".join(out)


def _write(node: object, out: list[str]) -> None:
    if isinstance(node, ast.AST):
        out.append(type(node).__name__)
        out.append("(")
        body_doc = isinstance(node, _DEFINITIONS)
        for field in node._fields:
            value = getattr(node, field, None)
            if value is None or value == [] or field == "type_comment":
                continue
            if body_doc and field == "body" and _docstring(value):
                value = value[1:]
                if not value:
                    continue
            out.append(field)
            out.append("=")
            _write(value, out)
            out.append(",")
        out.append(")")
    elif isinstance(node, list):
        out.append("[")
        for item in node:
            _write(item, out)
            out.append(",")
        out.append("]")
    else:
        out.append(repr(node))


def _docstring(body: list[ast.stmt]) -> bool:
    first = body[0] if body else None
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )


def _top_level(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level definitions by name: functions, classes, and names bound
    by plain assignments (the last binding wins, as at run time)."""
    found: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, _DEFINITIONS):
            found[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = stmt
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found[stmt.target.id] = stmt
    return found


def _names(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id


def reach(tree: ast.Module, roots: Iterable[str]) -> dict[str, ast.stmt]:
    """`roots` and every module-level definition they reach by name.

    Raises:
      KeyError: a root is not defined at module level.
    """
    top = _top_level(tree)
    seen: dict[str, ast.stmt] = {}
    todo = list(roots)
    for root in todo:
        if root not in top:
            raise KeyError(root)
    while todo:
        name = todo.pop()
        if name in seen or name not in top:
            continue
        seen[name] = top[name]
        todo.extend(n for n in _names(top[name]) if n not in seen)
    return seen


def digest(node: ast.AST) -> str:
    """A short hash of `node`'s canonical text."""
    return hashlib.sha256(canonical(node).encode()).hexdigest()[:16]


def source_path(module: str) -> str | None:
    """The source file of `module`, found without importing it (its parent
    packages are imported by the lookup), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not origin.endswith(".py"):
        return None
    return origin


def module_fingerprints(source: str, roots: Iterable[str]) -> dict[str, str]:
    """`name -> digest` for `roots` and the definitions they reach in
    `source` (a module's text)."""
    tree = ast.parse(source)
    return {name: digest(node) for name, node in sorted(reach(tree, roots).items())}


def fingerprints(module: str, roots: Iterable[str]) -> dict[str, str] | None:
    """`module_fingerprints` of an installed module, or None when its source
    cannot be read or a root is missing."""
    path = source_path(module)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        return module_fingerprints(source, roots)
    except (OSError, SyntaxError, KeyError, UnicodeDecodeError):
        return None


def member_fingerprint(module: str, owner: str, member: str) -> str | None:
    """The digest of method `member` of class `owner` in an installed module
    (the method alone: a class's other members change more often than the
    one a drop-in reproduces), or None when it cannot be read."""
    path = source_path(module)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    cls = _top_level(tree).get(owner)
    if not isinstance(cls, ast.ClassDef):
        return None
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == member:
            return digest(node)
    return None
