"""The trace-based speed reward: record one execution of a program built
with the BB address map (:func:`record` -> :class:`Trace`), then predict the
same run's instructions and cycles for any variant binary of it, other
register allocation, same CFG (:func:`estimate` -> :class:`Estimate`),
without running it; or from the variant's objects in memory, compiled in
process (``mlopt.allocate(..., traceable=True, keep_object=True)``;
:func:`estimate_objects`), with no link and no run. :func:`build_flags`
gives the clang flags of a traceable build. See docs/guide/reward.md."""

from __future__ import annotations

from .bbaddrmap import Block, FunctionMap, read_bb_addr_map
from .estimate import Estimate, estimate, estimate_objects
from .flags import build_flags
from .mca import CycleModel, host_cpu
from .trace import Trace, record

__all__ = ["Block", "CycleModel", "Estimate", "FunctionMap", "Trace", "build_flags", "estimate",
           "estimate_objects", "host_cpu", "read_bb_addr_map", "record"]
