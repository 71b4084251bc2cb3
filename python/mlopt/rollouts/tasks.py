"""The unit of work every pool runs: compile one corpus module, in process,
with the heuristic or a policy, and return its ``.text`` size, decisions and
(optionally) training log and call-site names. Functions here run inside
worker processes; a worker keeps the policies it loaded."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..corpus import CorpusEntry
from ..problems.inlining_linkage import takes_linkage
from .trace_cache import module_key, recorded_compile

# An IR2Vec vocabulary for every rollout that names none (LLVM 22): the CLI's
# --ir2vec-vocab sets it, so worker processes see it too.
IR2VEC_VOCAB_ENV = "MLOPT_IR2VEC_VOCAB"
# The recorded run the trace objective (problem regalloc-trace) costs modules by: --reward-trace sets it.
REWARD_TRACE_ENV = "MLOPT_REWARD_TRACE"

_POLICIES: dict[tuple, object] = {}
_VOCABS: dict = {}  # vocabs of the numpy twins this worker loaded (MLPPolicy.load's known_vocabs)
_CACHES: dict[tuple, object] = {}  # this worker's TextSizeCache per (LLVM major, per function)
_MODULES: dict[tuple, object] = {}  # modules this worker has loaded (checked by LLVM once)
_TRACES: dict[tuple, object] = {}  # traces this worker has loaded
_UNTRACED: set[tuple] = set()  # modules mlopt trace's cache did not hold (_start_from_trace)
REWARD_CPU_ENV = "MLOPT_REWARD_CPU"  # llvm-mca's -mcpu for the trace_cycles objective (default: this host)
_CYCLE_MODELS: dict = {}  # CPU -> this worker's CycleModel


@dataclass(frozen=True)
class RolloutTask:
    entry: CorpusEntry
    policy: str | None = None  # a policy path (None: LLVM's heuristic)
    log: bool = False
    call_sites: bool = False
    # The worker's TextSizeCache: skip the compile when the policy repeats an earlier trajectory of the
    # module (replay), skip code generation when the decisions repeat an earlier compile's, and generate
    # only the functions whose optimized IR is new otherwise, and start every compile after the first from the
    # module at the inliner's start; "prefix": all but replay; "functions": the decision and per-function
    # caches; "module": the decision-level cache alone; False: none.
    cache: bool | str = True
    forced: str | None = None  # '0'/'1': the first decisions, whatever the policy says (local search)
    # (callee name, 0/1) pairs: every later site calling that function gets the decision (callee search)
    forced_callees: tuple[tuple[str, int], ...] = ()
    decisions: bool = False  # return the decisions made (Rollout.policy_decisions)
    llvm: int | None = None  # the LLVM major that compiles it (None: the worker's default)
    ir2vec_vocab: str | None = None  # IR2Vec vocabulary (None: $MLOPT_IR2VEC_VOCAB; "": none)
    problem: str = "inlining"  # whose policy and objective (Problem.objective)
    # Sample the policy's decisions (PPO): ``policy`` is then its weights (.npz) and every decision is drawn
    # from softmax(logits / temperature) with numpy.random.default_rng(sample_seed) (policy/sampled.py).
    sample_seed: int | None = None
    temperature: float = 1.0
    # The same policy's numpy weights (.npz, MLPPolicy.save), written beside ``policy`` by its writer: trajectory
    # replay then settles most rows in numpy and runs the model only on near-ties (LoadedPolicy.twin).
    weights: str | None = None
    # With trajectory replay (cache=True): a module's replay starts from the heuristic's compile that mlopt
    # trace's cache holds for it (rollouts/trace_cache.py; keyed by the module, its command, LLVM and the
    # engine's build), so a policy deciding as the heuristic throughout compiles nothing. The same sizes.
    start_from_trace: bool = True
    # The log also has callee_linkage (compile(log_callee_linkage=True)): a trace for the inlining-linkage problem.
    # A policy that takes it logs it anyway.
    callee_linkage: bool = False
    # Also return the object's code sections (Rollout.text_sections; evaluation/linked.py): the compile keeps
    # its object and skips every cache (a cached size has no object).
    text_sections: bool = False
    # Also return the object's grouped (COMDAT) code sections (Rollout.grouped_code: (name hash, bytes));
    # the caches keep them. The linked_share objective always asks for them.
    grouped_code: bool = False


@dataclass
class Rollout:
    module: str
    text_size: int
    decisions: int
    inlined: int
    default_inlined: int
    log_bytes: bytes = field(default=b"", repr=False)
    call_sites: list | None = field(default=None, repr=False)
    default_decisions: np.ndarray | None = field(default=None, repr=False)
    policy_decisions: np.ndarray | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)
    cache_hit: bool = False
    llvm_seconds: float = 0.0  # inside the engine (LLVM and the policy)
    cost: float = 0.0  # the problem's objective (lower is better): .text bytes, RegAllocScore, ...
    text_sections: list | None = field(default=None, repr=False)  # corpus.elf.TextSection, on request
    grouped_code: list | None = field(default=None, repr=False)  # (section name hash, bytes), on request


def default_ir2vec_vocab() -> str:
    """$MLOPT_IR2VEC_VOCAB (what --ir2vec-vocab set), or "" for none."""
    return os.environ.get(IR2VEC_VOCAB_ENV, "")


def ir2vec_vocab_of(task: RolloutTask) -> str:
    """The task's IR2Vec vocabulary path, or "" for none."""
    return os.fspath(task.ir2vec_vocab if task.ir2vec_vocab is not None else default_ir2vec_vocab())


def _policy(path: str | None, vocab: str, problem: str = "inlining", weights: str | None = None):
    if path is None:
        return None
    st = os.stat(path)
    stamp = None if weights is None else (weights, os.stat(weights).st_mtime_ns)
    key = (path, st.st_mtime_ns, st.st_size, vocab, problem, stamp)
    if key not in _POLICIES:
        from ..compiler import load_policy
        from ..policy import MLPPolicy
        from ..problems import get, load_weights

        if len(_POLICIES) >= 64:  # ES writes new policies every iteration
            _POLICIES.clear()
        policy = (load_policy(path, ir2vec_vocab=vocab) if get(problem).objective == "text_size"
                  else load_policy(path, problem))
        if weights is not None:
            twin = load_weights(weights, policy.problem, known_vocabs=_VOCABS)  # written by mlopt's trainer
            if type(twin).logits is MLPPolicy.logits:  # a plain MLP (not a per-candidate network)
                policy.twin = twin
        _POLICIES[key] = policy
    return _POLICIES[key]


def _rollout_policy(task: RolloutTask, vocab: str):
    """The policy a task runs: loaded by the C++ pool, or (sampling) its
    numpy weights deciding by draws seeded by the task."""
    if task.sample_seed is None or task.policy is None:
        return _policy(task.policy, vocab, task.problem, task.weights)
    st = os.stat(task.policy)
    key = ("weights", task.policy, st.st_mtime_ns, st.st_size, task.problem)
    if key not in _POLICIES:
        from ..problems import load_weights

        if len(_POLICIES) >= 64:
            _POLICIES.clear()
        _POLICIES[key] = load_weights(task.policy, task.problem)
    from ..policy.sampled import sampled_policy

    return sampled_policy(_POLICIES[key], task.sample_seed, task.temperature)


CACHE_KINDS = (True, "prefix", "functions", "module")


def _cache(llvm: int, kind: bool | str):
    if kind not in CACHE_KINDS:
        raise ValueError(f"RolloutTask.cache must be one of {CACHE_KINDS} or False, not {kind!r}")
    if (llvm, kind) not in _CACHES:
        from ..compiler import TextSizeCache

        _CACHES[llvm, kind] = TextSizeCache(llvm=llvm, per_function=kind != "module",
                                            replay=kind is True,
                                            prefix_bytes=None if kind in (True, "prefix") else 0)
    return _CACHES[llvm, kind]


def entry_stamp(entry: CorpusEntry) -> tuple:
    """What a module's compile reads from disk, as it is now: its bitcode and command file (path, time,
    size) and its command override; a key for what a process keeps per module."""
    st = entry.bitcode_path.stat()
    cmd = entry.bitcode_path.with_suffix(".cmd")
    cmd_stamp = None if entry.command is not None or not cmd.exists() else (cmd.stat().st_mtime_ns, cmd.stat().st_size)
    command = None if entry.command is None else tuple(entry.command)
    return (str(entry.bitcode_path), st.st_mtime_ns, st.st_size, command, cmd_stamp)


def _module(entry: CorpusEntry, llvm: int | None):
    from .._native import resolve_llvm

    llvm = resolve_llvm(llvm)  # None: the worker's environment (MLOPT_LLVM, else the tools on PATH)
    key = (*entry_stamp(entry), llvm)
    if key not in _MODULES:
        if len(_MODULES) >= 4096:
            _MODULES.clear()
        _MODULES[key] = entry.load(llvm)
    return _MODULES[key]


def run_rollout(task: RolloutTask) -> Rollout:
    from ..problems import get

    return _OBJECTIVES[get(task.problem).objective](task)


def _size_rollout(task: RolloutTask, grouped: bool = False, cost_of=None) -> Rollout:
    """The inliner's rollout: optimize and generate code; cost = .text bytes, or ``cost_of(module, object)``
    (the compile then keeps its object: the caches skip only the passes before the inliner)."""
    from ..compiler import compile

    module = _module(task.entry, task.llvm)
    vocab = ir2vec_vocab_of(task)
    policy = _rollout_policy(task, vocab)
    linkage = task.callee_linkage or takes_linkage(policy)
    start = time.perf_counter()
    cache = _cache(module.llvm, task.cache) if task.cache and not task.text_sections else None
    grouped = grouped or task.grouped_code
    if cache is not None and task.start_from_trace and not task.call_sites and not grouped:
        _start_from_trace(cache, task.entry, module, vocab, linkage)  # the trace's compiles list no grouped code
    forced_callees = dict(task.forced_callees)
    if policy is not None:  # the one-site-linkonce rule, when a table is given; the task's own callees win
        rule = _package_call_sites()
        if rule is not None:
            forced_callees = {**rule.decisions(task.entry.name), **forced_callees}
    r = compile(module, policy, log=True, call_sites=task.call_sites, cache=cache, forced_decisions=task.forced,
                ir2vec_vocab=vocab or None, forced_callees=forced_callees, log_callee_linkage=linkage,
                keep_object=task.text_sections or cost_of is not None, grouped_code=grouped)
    cost = float(r.text_size) if cost_of is None else float(cost_of(module, r.object))
    llvm_seconds = time.perf_counter() - start
    sections = None
    if task.text_sections:
        from ..corpus.elf import text_sections

        sections = text_sections(r.object, task.entry.name)
    return Rollout(task.entry.name, r.text_size, int(len(r.decisions)), int(r.decisions.sum()),
                   int(r.default_decisions.sum()), r.log_bytes if task.log else b"", r.call_sites,
                   r.default_decisions if task.call_sites else None,
                   r.decisions if task.call_sites or task.decisions else None,
                   module.notes, r.cache_hit, llvm_seconds, cost=cost, text_sections=sections,
                   grouped_code=r.grouped_code)


_TABLES: dict = {}  # this worker's tables read from an environment variable: name -> ((path, mtime, size), table)


def _table_from_env(env: str, load, unset):
    """The table the file named by ``$env`` holds, read by ``load(path)`` once per worker and file version
    (a changed file is read again); ``unset()`` when the variable is empty. A missing or bad file raises
    through ``load``, which names it."""
    path = os.environ.get(env, "")
    if not path:
        return unset()
    try:
        st = os.stat(path)
    except OSError:
        return load(path)
    key = (path, st.st_mtime_ns, st.st_size)
    cached = _TABLES.get(env)
    if cached is None or cached[0] != key:
        _TABLES[env] = cached = (key, load(path))
    return cached[1]


def _package_call_sites():
    """The table of $MLOPT_PACKAGE_CALL_SITES (the one-site-linkonce rule); None when it is unset."""
    from ..problems.inlining_linked.call_sites import PACKAGE_CALL_SITES_ENV, PackageCallSites

    return _table_from_env(PACKAGE_CALL_SITES_ENV, PackageCallSites.load, lambda: None)


def _linked_shares():
    """The table of $MLOPT_LINKED_SHARES; unset raises, naming --linked-shares."""
    from ..problems.inlining_linked.shares import LINKED_SHARES_ENV, LinkedShares, load_from_env

    return _table_from_env(LINKED_SHARES_ENV, LinkedShares.load, load_from_env)


def _linked_rollout(task: RolloutTask) -> Rollout:
    """The inliner's rollout costed as the package links it: cost = the module's
    code with each grouped (COMDAT) section charged 1/k of its size, k the
    package's -Oz objects that have one (problems/inlining_linked)."""
    shares = _linked_shares()
    r = _size_rollout(task, grouped=True)
    r.cost = shares.charged(task.entry.name, r.text_size, r.grouped_code)
    return r


_FACTS: dict[tuple, dict] = {}  # this worker's link facts of full-LTO modules, by entry_stamp


def _lto_facts(entry: CorpusEntry, module, mode: str = "full") -> dict:
    """The link facts of an LTO corpus module of ``mode`` (read once per worker and module version); a module
    of another kind, or one without facts, raises CorpusError naming it."""
    from ..corpus.lto import lto_module_facts
    from ..errors import CorpusError

    if getattr(module, "lto", None) != mode:
        if mode == "full":
            kind = "a ThinLTO backend module (its object is one of the binary's: objective thinlto_binary)" \
                if module.lto == "thin" else "not from an LTO corpus"
            raise CorpusError(f"{entry.name}: the lto_binary objective costs full-LTO merged modules; this one is "
                              f"{kind}")
        kind = "a full-LTO merged module (objective lto_binary)" if module.lto == "full" else "not from an LTO corpus"
        raise CorpusError(f"{entry.name}: the thinlto_binary objective costs ThinLTO backend modules; this one is "
                          f"{kind}")
    key = entry_stamp(entry)
    if key not in _FACTS:
        facts = lto_module_facts(entry.bitcode_path)
        if facts is None:
            raise CorpusError(f"{entry.name}: no link facts ({entry.bitcode_path.stem}.link.json) beside its "
                              "bitcode: extract the corpus with mlopt corpus debian --lto full or corpus extract --lto")
        if len(_FACTS) >= 4096:
            _FACTS.clear()
        _FACTS[key] = facts
    return _FACTS[key]


def _lto_binary_rollout(task: RolloutTask) -> Rollout:
    """The inliner's rollout under full LTO costed by the binary: cost = the
    ``.text`` of the merged module's object linked as its binary with
    ``--gc-sections --icf=all`` (problems/inlining_lto, compiler/relink.py)."""
    from ..compiler.relink import relinked_text

    def cost_of(module, obj: bytes) -> int:
        return relinked_text(obj, _lto_facts(task.entry, module), llvm=module.llvm, where=task.entry.name)

    return _size_rollout(task, cost_of=cost_of)


def _thinlto_binary_rollout(task: RolloutTask) -> Rollout:
    """The inliner's rollout in one ThinLTO backend costed by the binary: cost = the ``.text`` of the
    module's object linked with the heuristic's objects of the binary's other backends, ``--gc-sections
    --icf=all`` (problems/inlining_thinlto, rollouts/thinlto_siblings.py)."""
    from ..compiler.relink import relinked_text
    from .thinlto_siblings import heuristic_objects, siblings

    def cost_of(module, obj: bytes) -> int:
        facts = _lto_facts(task.entry, module, "thin")
        others, position = siblings(task.entry)
        objects = heuristic_objects(others, module.llvm, lambda e: _module(e, module.llvm))
        return relinked_text(obj, facts, llvm=module.llvm, where=task.entry.name, others=objects,
                             position=position)

    return _size_rollout(task, cost_of=cost_of)


def _start_from_trace(cache, entry: CorpusEntry, module, vocab: str, linkage: bool = False) -> None:
    """Gives ``cache``'s trajectory replay the heuristic's compile of the module from mlopt trace's cache
    (the trace with ``callee_linkage`` logged, when ``linkage``), once: unless replay already holds a compile
    of it, or the cache had none (remembered)."""
    if cache.replay is None or cache.knows(module, ir2vec_vocab=vocab, callee_linkage=linkage):
        return
    seen = (*entry_stamp(entry), module.llvm, vocab, linkage)
    if seen in _UNTRACED:
        return
    recorded = recorded_compile(module_key(entry, module.llvm, vocab, linkage))
    if recorded is None:
        if len(_UNTRACED) >= 65536:
            _UNTRACED.clear()
        _UNTRACED.add(seen)
        return
    cache.add_heuristic_compile(module, recorded[0], recorded[1], ir2vec_vocab=vocab)


def _regalloc_rollout(task: RolloutTask) -> Rollout:
    """Register allocation with an eviction policy (the module compiled as
    its corpus command says, on an LLVM with the eviction advisor); cost =
    the module's RegAllocScore. ``decisions``: the eviction questions asked."""
    from ..compiler.allocate import allocate, regalloc_llvm

    module = _module(task.entry, regalloc_llvm(task.llvm))
    policy = _rollout_policy(task, "")
    start = time.perf_counter()
    r = allocate(module, policy, log=task.log)
    llvm_seconds = time.perf_counter() - start
    return Rollout(task.entry.name, r.text_size, r.questions, 0, 0, r.log_bytes if task.log else b"",
                   notes=module.notes + r.warnings, llvm_seconds=llvm_seconds, cost=r.score)


def _reward_trace():
    """The trace of $MLOPT_REWARD_TRACE, loaded once per worker (and file version)."""
    from ..errors import TraceError

    path = os.environ.get(REWARD_TRACE_ENV, "")
    if not path:
        raise TraceError(f"the trace objective needs a recorded run: pass --reward-trace TRACE (or set "
                         f"${REWARD_TRACE_ENV})")
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _TRACES:
        from ..reward import Trace

        trace = Trace.load(path)
        twins = [n for n in trace.functions if "#" in n]
        if twins:
            raise TraceError(f"{path}: {trace.program} has static functions of the same name in several modules "
                             f"({twins[0]}): per-module estimates cannot tell them apart")
        _TRACES.clear()
        _TRACES[key] = trace
    return _TRACES[key]


def _trace_rollout(task: RolloutTask, cycles: bool = False) -> Rollout:
    """Register allocation with an eviction policy, code generated as the
    trace reward needs it, costed by the recorded run: cost = the
    instructions the traced run executes in this module's functions
    (:func:`mlopt.reward.estimate_objects`, no link and no run)."""
    from ..compiler.allocate import allocate, regalloc_llvm
    from ..reward import estimate_objects

    trace = _reward_trace()
    module = _module(task.entry, regalloc_llvm(task.llvm))
    policy = _rollout_policy(task, "")
    start = time.perf_counter()
    r = allocate(module, policy, log=task.log, keep_object=True, traceable=True)
    e = estimate_objects(trace, [(task.entry.name, r.object)], cycles=cycles, model=_cycle_model() if cycles else None)
    llvm_seconds = time.perf_counter() - start
    cost = e.compiled_cycles if cycles else float(e.compiled_instructions)
    return Rollout(task.entry.name, r.text_size, r.questions, 0, 0, r.log_bytes if task.log else b"",
                   notes=module.notes + r.warnings, llvm_seconds=llvm_seconds, cost=float(cost))


def _cycle_model():
    """This worker's llvm-mca cost model (its cache loaded once), for
    ``$MLOPT_REWARD_CPU`` or this host's CPU."""
    from ..reward import CycleModel

    cpu = os.environ.get(REWARD_CPU_ENV) or None
    if cpu not in _CYCLE_MODELS:
        _CYCLE_MODELS[cpu] = CycleModel(cpu, 19)
    return _CYCLE_MODELS[cpu]


def _trace_cycles_rollout(task: RolloutTask) -> Rollout:
    """As :func:`_trace_rollout`, cost = the cycles the traced run spends in
    this module's functions (the trace's cycles model, llvm-mca for
    ``$MLOPT_REWARD_CPU`` or this host; what is outside the module is the
    same for every policy and left out)."""
    return _trace_rollout(task, cycles=True)


# Problem.objective -> the rollout that measures it
_OBJECTIVES = {"text_size": _size_rollout, "linked_share": _linked_rollout, "lto_binary": _lto_binary_rollout,
               "thinlto_binary": _thinlto_binary_rollout,
               "regalloc_score": _regalloc_rollout,
               "trace_instructions": _trace_rollout, "trace_cycles": _trace_cycles_rollout}
