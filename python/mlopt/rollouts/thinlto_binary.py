"""A ThinLTO binary linked whole with one policy: every backend module of the
binary (a ThinLTO corpus's ``<output>.thinlto/`` directory, by name: the
order :func:`~mlopt.rollouts.thinlto_siblings.siblings` keeps) compiled by
the policy (None: the heuristic), each with its forced callees, and their
objects linked by lld as the binary's link facts say. What ``clang
-flto=thin`` with the plugin inside lld links, code outside the backends
(assembly) aside: the judge of a policy under ThinLTO, where
``thinlto_binary`` costs one module against the heuristic's others. The
heuristic's objects come from the same on-disk cache as those siblings'.

:func:`thinlto_binary_text` takes a :class:`ThinLtoBinary` (picklable, one
pool item per binary)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..corpus import CorpusEntry
from ..errors import MloptError
from .thinlto_siblings import heuristic_objects


@dataclass(frozen=True)
class ThinLtoBinary:
    """One binary's backend modules, the policy that compiles them (a path, None: the heuristic) under
    ``problem``, the LLVM major, lld's flags and each module's forced callees (module name -> callee ->
    0 or 1)."""

    entries: Sequence[CorpusEntry]
    policy: str | None = None
    llvm: int = 19
    lld_flags: Sequence[str] = ()
    problem: str = "inlining-thinlto"
    forced: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def thinlto_binary_text(binary: ThinLtoBinary, policy=None) -> int:
    """The ``.text`` bytes of ``binary`` linked (``policy``: a loaded policy instead of ``binary.policy``).
    MloptError naming the binary when lld fails."""
    from ..compiler import compile, load_policy
    from ..compiler.relink import relink_command
    from ..corpus.elf import read_sections, text_bytes
    from ..corpus.lto import lto_module_facts

    if not binary.entries:
        raise MloptError("a ThinLTO binary without backend modules")
    if policy is None and binary.policy is not None:
        policy = load_policy(binary.policy, binary.problem)
    entries = sorted(binary.entries, key=lambda e: e.bitcode_path.name)
    with tempfile.TemporaryDirectory(prefix="mlopt-thin-") as d:
        paths = []
        for i, e in enumerate(entries):
            forced = binary.forced.get(e.name, {})
            if policy is None and not forced:  # the heuristic's object, compiled once and kept in the cache
                paths += heuristic_objects([e], binary.llvm, lambda e: e.load(binary.llvm))
                continue
            r = compile(e.load(binary.llvm), policy, keep_object=True, forced_callees=forced,
                        log=policy is not None, log_callee_linkage=policy is not None)
            paths.append(Path(d) / f"{i}.o")
            paths[-1].write_bytes(r.object)
        out = Path(d) / "binary"
        cmd = relink_command(paths[0], out, lto_module_facts(entries[0].bitcode_path), binary.llvm,
                             binary.lld_flags, paths[1:])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise MloptError(f"{entries[0].bitcode_path.parent}: lld failed to link its {len(entries)} backends' "
                             f"objects: {done.stderr.strip()[-400:]}")
        return text_bytes(read_sections(out))
