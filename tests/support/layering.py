"""An import-layering checker for a Python package (used by test_layering).

``read_layers(markdown)`` takes the fenced ``layers`` block of a document:
one line per layer, lowest first, each listing module prefixes (a prefix
covers the module and everything under it; ``name$`` is that module only). ``check``
scans every module under a package directory with :mod:`ast` -- imports at
any depth (function-level ones too) and ``importlib.import_module("...")``
with a literal name -- and returns the violations, one line each:

- ``a -> b: upward import`` (b's layer is above a's);
- ``a -> b: sideways import`` (same layer, different prefix);
- ``cycle: a -> b -> a``;
- ``a: on no layer``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path


def read_layers(markdown: str) -> list[list[str]]:
    m = re.search(r"^```layers\n(.*?)^```", markdown, re.S | re.M)
    if not m:
        raise ValueError("no ```layers block")
    return [line.split() for line in m.group(1).splitlines() if line.strip()]


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package directory ``root`` by dotted name."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = path
    return out


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    package_root = name.split(".")[0]
    found: set[str] = set()

    def add(target: str, *, module: bool = True) -> None:
        # A module name that is not a .py file of the package is a compiled
        # extension (mlopt._core) or outside the package: not an edge. A
        # name imported *from* a module is an edge to that module.
        if target in known:
            found.add(target)
        elif not module:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target:
                found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    add(full)
                elif base.split(".")[0] == package_root:
                    add(base, module=False)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            add(node.args[0].value)
    found.discard(name)
    return found


def layer_of(name: str, layers: list[list[str]]) -> tuple[int, str] | None:
    best = None
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            exact = p.endswith("$")
            p = p.rstrip("$")
            hit = name == p or (not exact and name.startswith(p + "."))
            if hit and (best is None or len(p) > len(best[1])):
                best = (i, p)
    return best


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One representative cycle per strongly connected component (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(_path_in(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _path_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    path, seen, v = [start], {start}, start
    while True:
        v = min(w for w in graph[v] if w in component)
        path.append(v)
        if v in seen:
            return path[path.index(v):]
        seen.add(v)


def check(root: Path, package: str, layers: list[list[str]]) -> list[str]:
    modules = module_names(root, package)
    known = set(modules)
    graph = {name: imports_of(name, path, known) for name, path in modules.items()}
    problems = []
    for name in sorted(graph):
        here = layer_of(name, layers)
        if here is None:
            problems.append(f"{name}: on no layer")
            continue
        for target in sorted(graph[name]):
            there = layer_of(target, layers)
            if there is None:
                continue  # reported for the target itself
            if there[0] > here[0]:
                problems.append(f"{name} -> {target}: upward import")
            elif there[0] == here[0] and there[1] != here[1]:
                problems.append(f"{name} -> {target}: sideways import")
    problems += ["cycle: " + " -> ".join(c) for c in _cycles(graph)]
    return problems
