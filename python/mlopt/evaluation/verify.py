"""``--verify-with-clang``: what a user's build gets. Each module is
recompiled by stock ``clang-19`` from its own command line (the ``.cmd``:
``clang-19 -cc1 <cmd> -x ir M.bc``), with the plugin and the policy, and its
``.text`` size read from the object; every size must equal the in-process
engine's. With the one-site-linkonce rule (``mlopt eval --package-call-sites``)
each module's clang also gets its package's rule as
``-mlopt-inline-callee-decisions`` (the files ``mlopt corpus call-sites
--callee-decisions`` writes), as a user's build of the package would."""

from __future__ import annotations

import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._native import default_llvm
from ..compiler.plugin import plugin_path
from ..corpus import CorpusEntry, split_command_file
from ..corpus.elf import read_sections
from ..corpus.split import package_of

# Arguments of an embedded command line that must not be repeated: the
# embedding itself, and inputs/outputs clang stripped or that we give.
_DROP = {"-fembed-bitcode=all", "-fembed-bitcode", "-fembed-bitcode=bitcode", "-fembed-bitcode=marker"}
_DROP_WITH_VALUE = {"-o", "-x", "-main-file-name", "-dependency-file", "-MT", "-MF"}


def text_size(obj: str | os.PathLike) -> int:
    """Bytes of every ``.text*`` section (what llvm-size -A lists)."""
    return sum(len(v) for k, v in read_sections(obj).items() if k == ".text" or k.startswith(".text."))


def clang_command(entry: CorpusEntry, output: Path, policy: str | None, clang: str | None = None,
                  callee_decisions: str | None = None) -> list[str]:
    """Stock clang's command for one module (``clang``: default ``clang-<major>``
    of the LLVM mlopt uses, with that major's plugin; ``callee_decisions``: a
    ``-mlopt-inline-callee-decisions`` file)."""
    clang = clang or f"clang-{default_llvm()}"
    if entry.command is not None:
        args = list(entry.command)
    else:
        text = entry.bitcode_path.with_suffix(".cmd").read_bytes().decode("utf-8", "surrogateescape")
        args = split_command_file(text)
    from ..rollouts.tasks import default_ir2vec_vocab

    vocab = default_ir2vec_vocab() or None
    plugin = [] if policy is None else [f"-mlopt-inline-model={policy}"]
    if policy is not None and vocab:
        plugin.append(f"-mlopt-inline-ir2vec-vocab={vocab}")
    if callee_decisions is not None:
        plugin.append(f"-mlopt-inline-callee-decisions={callee_decisions}")
    if "-cc1" in args:
        kept, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in _DROP_WITH_VALUE:
                skip = True
                continue
            if a not in _DROP:
                kept.append(a)
        load = [] if not plugin else ["-load", str(plugin_path()), f"-fpass-plugin={plugin_path()}"]
        mllvm = [x for o in plugin for x in ("-mllvm", o)]
        return [clang, *kept, *load, *mllvm, "-x", "ir", str(entry.bitcode_path), "-o", str(output)]
    # A driver command line (or none: clang's defaults at -Oz).
    from ..compiler.plugin import clang_flags

    driver = [a for a in args[1:] if a not in _DROP] if args else ["-Oz"]
    flags = (clang_flags(model=policy, ir2vec_vocab=vocab if policy is not None else None,
                         callee_decisions=callee_decisions) if plugin else [])
    return [clang, *driver, *flags, "-c", "-x", "ir", str(entry.bitcode_path), "-o", str(output)]


def clang_text_sizes(entries: list[CorpusEntry], policy: str | None, *, threads: int | None = None,
                     clang: str | None = None, package_call_sites: str | None = None) -> list[int | str]:
    """``.text`` per module from stock clang (an error message where it failed); with
    ``package_call_sites`` (a table), each module also given its package's rule file."""
    with tempfile.TemporaryDirectory(prefix="mlopt-verify-") as tmp:
        rules: dict[str, str] = {}
        if package_call_sites is not None:
            from ..problems.inlining_linked.call_sites import PackageCallSites

            table = PackageCallSites.load(package_call_sites)
            for package in sorted({package_of(e.name) for e in entries}):
                rules[package] = str(Path(tmp) / f"rule-{len(rules)}.txt")
                table.write_callee_decisions(package, rules[package])

        def one(i: int) -> int | str:
            out = Path(tmp) / f"{i}.o"
            rule = rules.get(package_of(entries[i].name)) if rules else None
            r = subprocess.run(clang_command(entries[i], out, policy, clang, rule), capture_output=True, text=True)
            if r.returncode != 0:
                return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0]
            return text_size(out)

        with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as ex:
            return list(ex.map(one, range(len(entries))))


def verify_with_clang(rows, entries: list[CorpusEntry], policy: str, *, threads: int | None = None,
                      package_call_sites: str | None = None) -> dict:
    """Recompiles the evaluated modules (``rows``: :class:`ModuleResult`)
    with stock clang-19 + the plugin (and each package's rule file, with
    ``package_call_sites``); ``{"modules", "mismatches"}`` where a
    mismatch names the module and both sizes."""
    by_name = {e.name: e for e in entries}
    sizes = clang_text_sizes([by_name[r.module] for r in rows], policy, threads=threads,
                             package_call_sites=package_call_sites)
    return {"modules": len(rows), "mismatches": [
        {"module": r.module, "in_process": r.policy_text, "clang": s} for r, s in zip(rows, sizes)
        if s != r.policy_text]}
