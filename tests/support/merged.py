"""A synthetic merged module with a known optimum, for trainers under full
LTO on the real compiler and linker: a shared library of two C files, the
helpers ``h<i>`` (hidden, so LTO internalizes them) in one and their
exported callers ``e<i>_<j>`` in the other, so only the link-time inliner
sees the sites. Three kinds of helper where -Oz's heuristic decides
differently from what is smallest, measured on LLVM 19 and 22:

- ``popcount``: its cost model counts ``__builtin_popcount`` as one
  instruction; without POPCNT it is a dozen; the heuristic inlines every
  site, declining them all is smaller;
- ``switch``: a switch on a constant argument; inlining folds it to one
  case; the heuristic inlines (it is right);
- ``mix``: straight-line arithmetic of ``n`` statements; cheap enough at
  one statement for the heuristic to inline every site, smaller declined
  once it has several sites.

The optimum is found by enumeration (:func:`callee_optimum`): every choice
of "inline all sites" / "decline all sites" per helper, each a real compile
and lld link costed by the binary's ``.text``."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

from mlopt.compiler.plugin import lld_flags, wl_flags

# (kind, size, callers): the module the trainer tests use
HELPERS = (("popcount", 2, 2), ("switch", 6, 3), ("mix", 1, 4), ("popcount", 1, 3), ("switch", 4, 2),
           ("mix", 2, 2))


def _body(i: int, kind: str, n: int) -> str:
    if kind == "mix":
        return "\n".join(f"  x = (x ^ {1000003 * (i + 1) + 7919 * k}u) * (y | {k + 3}u); y += x >> {1 + k % 7};"
                         for k in range(n)) + "\n  return x ^ y;"
    if kind == "switch":
        cases = "\n".join(f"  case {k}: return x * {2 * k + 3}u + y * {1000003 * (i + 1) + k}u ^ (x >> {k % 5 + 1});"
                          for k in range(n))
        return f"  switch (y & 15) {{\n{cases}\n  default: return x;\n  }}"
    if kind == "popcount":
        return "\n".join(f"  x += __builtin_popcount(x ^ {1000003 * (i + 1) + k}u);" for k in range(n)) + \
            "\n  return x + y;"
    raise ValueError(kind)


def sources(helpers=HELPERS) -> dict[str, str]:
    hidden = '#define H __attribute__((visibility("hidden")))\n'
    h, e = [hidden], [hidden]
    for i, (kind, n, callers) in enumerate(helpers):
        h.append(f"H unsigned h{i}(unsigned x, unsigned y) {{\n{_body(i, kind, n)}\n}}\n")
        e.append(f"H unsigned h{i}(unsigned x, unsigned y);\n")
        e += [f"unsigned e{i}_{j}(unsigned a) {{ return h{i}(a + {j + 11}u, {j % 16}u) + {97 * j + i}u; }}\n"
              for j in range(callers)]
    return {"h.c": "".join(h), "e.c": "".join(e)}


def build(root: Path, major: int, helpers=HELPERS) -> Path:
    """Compiles and links ``libsyn.so`` with full LTO, the plugin saving its merged module; returns its corpus."""
    from mlopt.corpus.lto import extract_lto_corpus

    root.mkdir(parents=True, exist_ok=True)
    objects = []
    for name, text in sources(helpers).items():
        (root / name).write_text(text)
        objects.append(root / (name + ".o"))
        subprocess.run([f"clang-{major}", "-Oz", "-fPIC", "-flto=full", "-c", name, "-o", objects[-1]], cwd=root,
                       check=True, capture_output=True)
    subprocess.run([f"clang-{major}", "-Oz", "-flto=full", "-fuse-ld=lld", "-shared", *objects,
                    *wl_flags(list(lld_flags(llvm=major, save_lto_modules=root / "modules"))), "-o", "libsyn.so"],
                   cwd=root, check=True, capture_output=True)
    extract_lto_corpus(root / "modules", root / "corpus")
    return root / "corpus"


def callee_optimum(entry, helpers=HELPERS) -> tuple[float, dict[str, int]]:
    """The smallest cost over every all-or-none choice per helper (2**len(helpers) compiles) and that choice."""
    from mlopt.rollouts import RolloutTask, run_rollouts

    names = [f"h{i}" for i in range(len(helpers))]
    choices = list(itertools.product((0, 1), repeat=len(names)))
    results = run_rollouts([RolloutTask(entry, None, problem="inlining-lto", forced_callees=tuple(zip(names, c)))
                            for c in choices], quiet=True)
    bad = [r.describe() for r in results if not r.ok]
    if bad:
        raise AssertionError(bad[0])
    cost, choice = min((r.value.cost, c) for r, c in zip(results, choices))
    return cost, dict(zip(names, choice))
