"""Package-linked ``.text``: an estimate of what a policy saves once the
objects are linked, next to the per-module sum every other figure uses.

The per-module sum counts a C++ inline function or template instance
(``linkonce_odr``, emitted in a COMDAT section group) once per object that
emits it; a linker keeps one copy per name. So a policy that inlines the
last call of such a function in every module drops copies the link would
have dropped anyway, and the per-module sum credits it with all of them.
The estimate links each package as one output: its objects' code outside
section groups, plus each grouped section name once (the first object in
module-name order that has it, as a linker keeps the first). A package
that ships several binaries keeps a copy per binary, so its real size lies
between this and the per-module sum."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from ..corpus.elf import TextSection
from .report import package_name


def linked_text(objects: Mapping[str, Iterable[TextSection]]) -> dict[str, int]:
    """Per package (the module name's first path component): the code bytes
    of its objects (module name -> text sections) linked as one output."""
    total: dict[str, int] = defaultdict(int)
    kept: dict[str, set[str]] = defaultdict(set)
    for module in sorted(objects):
        package = package_name(module)
        for s in objects[module]:
            if not s.comdat:
                total[package] += s.size
            elif s.name not in kept[package]:
                kept[package].add(s.name)
                total[package] += s.size
    return dict(total)


def linked_summary(heuristic: Mapping[str, Iterable[TextSection]],
                   policy: Mapping[str, Iterable[TextSection]]) -> dict:
    """``{"total": ..., "packages": {name: ...}}`` with ``heuristic_text``, ``policy_text``, ``delta`` and
    ``delta_percent`` of the package-linked estimate; the modules are those both sides have."""
    both = set(heuristic) & set(policy)
    h = linked_text({m: heuristic[m] for m in both})
    p = linked_text({m: policy[m] for m in both})

    def row(a: int, b: int) -> dict:
        return {"heuristic_text": a, "policy_text": b, "delta": b - a,
                "delta_percent": 100.0 * (b - a) / a if a else 0.0}

    return {"total": row(sum(h.values()), sum(p.values())),
            "packages": {name: row(h[name], p.get(name, 0)) for name in sorted(h)}}
