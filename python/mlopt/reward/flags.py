"""The clang flags of a traceable build: the basic-block address map (with
successor IDs, so a changed CFG is seen) and the options that keep the
machine CFG independent of register allocation, so two builds that differ
only in eviction decisions share one trace.

Which passes after register allocation change the CFG depending on the
allocation was found by experiment (docs/guide/reward.md: lz4 built with the
default advisor and two random eviction policies, BB address maps compared
with each option left out in turn): the branch folder (tail merging and
block merging of identical code: ``-disable-branch-fold``), the tail merging
that MachineBlockPlacement runs itself (``-enable-tail-merge=false``), tail
duplication during placement (``-tail-dup-placement=false``, size
dependent) and the post-RA tail duplicator (``-disable-tail-duplicate``).
"""

from __future__ import annotations

from ..errors import RewardUnsupportedError

ADDRESS_MAP = ["-fbasic-block-address-map", "-mllvm", "-pgo-analysis-map=br-prob"]
CFG_PRESERVING = ["-disable-branch-fold", "-enable-tail-merge=false", "-tail-dup-placement=false",
                  "-disable-tail-duplicate"]
SUPPORTED_LLVM = (19,)


def build_flags(llvm: int = 19) -> list[str]:
    if llvm not in SUPPORTED_LLVM:
        raise RewardUnsupportedError(f"the trace reward supports LLVM {', '.join(map(str, SUPPORTED_LLVM))}, "
                                   f"not {llvm} (its BB address map and passes were verified for LLVM 19)")
    out = list(ADDRESS_MAP)
    for option in CFG_PRESERVING:
        out += ["-mllvm", option]
    return out
