"""The in-process compiler: LLVM's optimizer and code generator (19 or 22)
inside Python, with the plugin's inline advisor and policy runners.

    import mlopt
    m = mlopt.Module("lz4.bc")                       # .bc/.ll path or bytes
    r = mlopt.compile(m, policy=mlopt.load_policy("policy.so"))
    r.text_size, r.decisions, r.log["callee_users"]

``compile`` compiles a module the way its compile command says clang
compiles it (``Module.from_corpus``: the ``.cmd``'s -O level, target,
relocation model and vectorizers); a module without one is compiled as
``clang-N -Oz -c`` compiles by default (``default<Oz>``, codegen -O2,
position-independent code on Linux, SLP vectorizer on; ``Module.notes``
says so). With the same settings its object bytes are those of ``opt-N
-passes=<pipeline>`` followed by ``llc-N -filetype=obj`` of the module's
LLVM major N (19 or 22), without processes, files or pipes. The GIL is released while LLVM runs, so ``compile_many(...,
threads=N)`` compiles N modules at once; each compile has its own
LLVMContext and gives the same bytes as a sequential run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np

from .._native import engine, resolve_llvm
from ..corpus import CODEGEN_LEVEL, Module
from ..errors import PolicyError
from ..log import Log, read_log
from ..policy import LoadedPolicy, MLPPolicy
from ..problems import get as get_problem
from ..problems import inlining
from ..problems import load_policy as load_problem_policy
from ..problems.inlining_linkage import LINKAGE, takes_linkage  # its 40th input, logged on request
from .replay import TrajectoryReplay, replayed

PathLike = str | os.PathLike


@dataclass
class CompileResult:
    """What one in-process compile produced.

    ``text_size``: bytes of ``.text`` in the object code (0 without codegen).
    ``decisions``: the inliner's decision at every call site it asked the
    policy about, in order (int64; the log's ``inlining_decision``).
    ``default_decisions``: the stock heuristic's answer for the same sites.
    ``log``: the training log (the plugin's development-mode layout), or
    None when ``log=False`` or the pipeline has no inliner.
    ``call_sites``: with ``call_sites=True``, (caller, callee) of each
    decision, row for row with the log.
    ``grouped_code``: with ``grouped_code=True``, the object's code sections
    that are members of a section group (COMDAT: a linker keeps one copy
    per name), as (:func:`section_name_hash` of the name, bytes) in section
    order; None otherwise.
    """

    module: str
    text_size: int
    decisions: np.ndarray
    default_decisions: np.ndarray
    log: Log | None
    log_bytes: bytes = field(repr=False)
    object: bytes | None = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)
    call_sites: list[tuple[str, str]] | None = field(default=None, repr=False)
    cache_hit: bool = False
    grouped_code: list[tuple[int, int]] | None = field(default=None, repr=False)


def section_name_hash(name: str, llvm: int | str | None = None) -> int:
    """The key ``CompileResult.grouped_code`` gives a section of that name
    (xxh3-64 of its bytes; the same for every LLVM major)."""
    from .._native import resolve_llvm

    return int(engine(resolve_llvm(llvm)).section_name_hash(name))


PolicyLike = object  # None | LoadedPolicy | InlinePolicy | path | callable


# What a TextSizeCache keeps of modules at the inliner's start (per worker, so per rollout process):
# $MLOPT_INLINER_PREFIX_BYTES, else this.
DEFAULT_PREFIX_BYTES = 512 << 20
PREFIX_BYTES_ENV = "MLOPT_INLINER_PREFIX_BYTES"


def default_prefix_bytes() -> int:
    """$MLOPT_INLINER_PREFIX_BYTES (0 turns the inliner-prefix cache off), else DEFAULT_PREFIX_BYTES."""
    text = os.environ.get(PREFIX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_PREFIX_BYTES
    if not text.isdigit():
        raise ValueError(f"${PREFIX_BYTES_ENV} must be a number of bytes (0: off), not {text!r}")
    return int(text)


class TextSizeCache:
    """``.text`` sizes of compiles already made, keyed by (module bitcode,
    compile options, the inliner's decision sequence), 128-bit hashed. LLVM
    is deterministic, so a compile that repeats an earlier one's decisions
    has the same code: with this cache it skips code generation. Thread-safe;
    at most ``capacity`` entries (oldest dropped first).

    ``per_function`` (default): a compile that makes new decisions still
    reuses machine code per function -- only functions whose optimized IR
    is new are generated (the others become stubs of their known size, so
    the layout and the ``.text`` size are exactly the full compile's).
    ``functions_reused`` / ``functions_compiled`` count them.

    ``replay`` (default): a compile whose policy -- LLVM's heuristic or one
    loaded by :func:`load_policy` -- makes, on the features an earlier
    compile of the module logged, exactly that compile's decisions is not
    compiled at all: the compiler would repeat that compile step for step
    (:mod:`mlopt.compiler.replay`; an exact check by the policy's own
    runner, not a prediction). ``replays`` counts them.

    ``prefix_bytes`` (default: ``$MLOPT_INLINER_PREFIX_BYTES``, else 512 MiB; 0: off): a compile also keeps the
    module as the optimizer's passes before the inliner leave it (they do
    not depend on the policy), and a later compile of the same module and
    options starts from there instead of running them again. At most that
    many bytes of such modules are kept (least recently used dropped);
    ``prefix_hits`` / ``prefix_misses`` count the compiles that did / did not
    find theirs. Modules with debug info or coroutines are not kept."""

    def __init__(self, capacity: int = 1 << 20, llvm: int | str | None = None, per_function: bool = True,
                 replay: bool = True, prefix_bytes: int | None = None):
        prefix_bytes = default_prefix_bytes() if prefix_bytes is None else prefix_bytes
        if prefix_bytes < 0:
            raise ValueError(f"TextSizeCache: prefix_bytes must be >= 0, not {prefix_bytes}")
        self.llvm = resolve_llvm(llvm)  # the compiles it serves: modules of this LLVM major
        self._cache = engine(self.llvm).TextSizeCache(capacity, per_function, prefix_bytes)
        self.replay = TrajectoryReplay() if replay else None

    @property
    def prefix_hits(self) -> int:
        return self._cache.prefix_hits

    @property
    def prefix_misses(self) -> int:
        return self._cache.prefix_misses

    @property
    def prefix_bytes(self) -> int:
        """Bytes of modules kept at the inliner's start."""
        return self._cache.prefix_bytes

    @property
    def replays(self) -> int:
        return self.replay.replays if self.replay is not None else 0

    @property
    def per_function(self) -> bool:
        return self._cache.per_function

    @property
    def functions_reused(self) -> int:
        return self._cache.functions_reused

    @property
    def functions_compiled(self) -> int:
        return self._cache.functions_compiled

    @property
    def hits(self) -> int:
        """Compiles the cache answered: by trajectory replay (no compile) or
        by repeated decisions (no code generation)."""
        return self._cache.hits + self.replays

    @property
    def misses(self) -> int:
        return self._cache.misses

    def __len__(self) -> int:
        return self._cache.size

    def knows(self, module: Module, pipeline: str | None = None, ir2vec_vocab: str | None = None,
              callee_linkage: bool = False) -> bool:
        """Whether trajectory replay holds a compile of ``module`` (these options; logging ``callee_linkage``
        or not) to check policies against."""
        return self.replay is not None and self.replay.has(_replay_key(module, pipeline, ir2vec_vocab or "",
                                                                       callee_linkage))

    def add_heuristic_compile(self, module: Module, text_size: int, log_bytes: bytes, pipeline: str | None = None,
                              ir2vec_vocab: str | None = None) -> None:
        """Gives trajectory replay the heuristic's compile of ``module`` made earlier with the same engine and
        options (``mlopt trace``'s cache: its ``.text`` bytes and training log), as if this cache had compiled
        it: a policy that decides as the heuristic at every step of that log is answered without a compile.
        ValueError when the log is not a heuristic's (a decision differs from ``inlining_default``); nothing
        without replay."""
        if self.replay is None:
            return
        parsed, decisions, defaults = _parsed_log(log_bytes)
        linkage = parsed is not None and LINKAGE in parsed.feature_names
        if not np.array_equal(decisions, defaults):
            raise ValueError(f"{module.name}: the log given as the heuristic's compile decides otherwise than "
                             f"inlining_default at {int(np.count_nonzero(decisions != defaults))} call sites")
        self.replay.add(_replay_key(module, pipeline, ir2vec_vocab or "", linkage),
                        CompileResult(module.name, int(text_size), decisions, defaults, parsed, bytes(log_bytes)))


def _resolve_policy(policy, vocab: str = ""):
    """(C++ policy pool, python callable) for a policy argument, checked
    against the compile's IR2Vec vocabulary (its path, or "")."""
    if policy is None:
        return None, None
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy, ir2vec_vocab=vocab)
    if isinstance(policy, LoadedPolicy):
        _check_problem(policy, vocab)
        return policy.pool, None
    if isinstance(policy, MLPPolicy):
        _check_problem(policy, vocab)
        return None, _decision_callable(policy.decide, _takes_embeddings(policy.problem),
                                        inlining.DEFAULT_DECISION in policy.problem.feature_names,
                                        LINKAGE in policy.problem.feature_names)
    if callable(policy):
        return None, _decision_callable(policy, None, bool(getattr(policy, "takes_default", False)),
                                        bool(getattr(policy, "takes_linkage", False)))
    raise TypeError(f"policy must be None, a loaded policy, a path, an InlinePolicy or a callable, "
                    f"not {type(policy).__name__}")


def load_policy(path: PathLike, problem=None, *, ir2vec_vocab: PathLike | None = None, **kwargs) -> LoadedPolicy:
    """The one public way to load a policy (``mlopt.load_policy``): a
    ``.tflite`` file, a model directory (``model.tflite`` +
    ``output_spec.json``) or an AOT-compiled ``.so``, for ``problem`` (a
    name or :class:`mlopt.problems.Problem`; default: the inlining problem a
    compile with ``ir2vec_vocab``, or none, poses). A policy that takes IR2Vec
    embeddings, loaded without a vocabulary, says so. ``kwargs``:
    ``feed_prefix``, ``litert_library`` (:class:`mlopt.policy.LoadedPolicy`).
    Below the compiler layer, :func:`mlopt.problems.load_policy` does the
    same for a given problem (no IR2Vec vocabulary)."""
    if problem is not None and ir2vec_vocab:
        raise TypeError("load_policy: give a problem or an ir2vec_vocab, not both (the vocabulary sets the problem)")
    try:
        return load_problem_policy(path, problem if problem is not None else inlining_problem(ir2vec_vocab), **kwargs)
    except PolicyError as e:
        if problem is None and not ir2vec_vocab and f"{inlining.DEFAULT_DECISION}:0'" in str(e):
            # a policy that takes the heuristic's decision: the inlining-default problem, or with the
            # callee's linkage too, inlining-linkage
            try:
                return load_problem_policy(path, get_problem("inlining-default"), **kwargs)
            except PolicyError as e2:
                if "callee_linkage:0'" not in str(e2):
                    raise
                return load_problem_policy(path, get_problem("inlining-linkage"), **kwargs)
        if problem is None and not ir2vec_vocab and any(f"{name}:0'" in str(e) for name in inlining.EMBEDDINGS):
            raise PolicyError(f"{e} (the policy takes IR2Vec embeddings: give an IR2Vec vocabulary, "
                              "--ir2vec-vocab / ir2vec_vocab=, on LLVM 22)") from None
        raise


def inlining_problem(ir2vec_vocab: PathLike | None = None):
    """The inlining problem a compile with this IR2Vec vocabulary (or none)
    poses: ``inlining``, or ``inlining-ir2vec:<its dimension>``."""
    return inlining.with_ir2vec(inlining.ir2vec_dimension(ir2vec_vocab)) if ir2vec_vocab else inlining.PROBLEM


def _takes_embeddings(problem) -> bool:
    return any(name in problem.feature_names for name in inlining.EMBEDDINGS)


def _check_problem(policy, vocab: str) -> None:
    problem = policy.problem
    if problem.decision.name != inlining.DECISION:
        raise PolicyError(f"{policy!r} is a policy for {problem.name!r}; compile() needs an inlining policy")
    inputs = [s.name for s in problem.features]
    if isinstance(policy, LoadedPolicy):
        inputs = policy.inputs  # the features the model takes
    takes = [n for n in inlining.EMBEDDINGS if n in inputs]
    if takes and not vocab:
        raise PolicyError(f"{policy!r} takes {takes[0]!r} (IR2Vec): compile with ir2vec_vocab=<vocabulary.json> "
                          "on LLVM 22")
    if takes and vocab:
        want = problem.features[problem.feature_names.index(takes[0])]
        dim = inlining.ir2vec_dimension(vocab)
        if list(want.shape) != [dim]:
            raise PolicyError(f"{policy!r} takes {takes[0]!r} as {want.type} {list(want.shape)}, but the "
                              f"vocabulary {vocab} gives {dim}-d embeddings")


def _decision_callable(fn: Callable, with_embeddings: bool | None, with_default: bool = False,
                       with_linkage: bool = False) -> Callable:
    """The engine calls it with the int64 features (then, ``with_default``,
    the heuristic's decision: the ``inlining-default`` problem's 39th
    input; then, ``with_linkage``, the callee's linkage class:
    ``inlining-linkage``'s 40th), and the float embeddings as a second array when the compile has
    an IR2Vec vocabulary.
    ``with_embeddings``: True: one float64 row, ints then embeddings; False:
    the int64 features only; None: as the engine calls it."""
    def call(ints: np.ndarray, floats: np.ndarray | None = None):
        if with_embeddings:
            answer = fn(np.concatenate([ints.astype(np.float64), floats.astype(np.float64)]))
        elif with_embeddings is None and floats is not None:
            answer = fn(ints, floats)
        else:
            answer = fn(ints)
        a = np.asarray(answer)
        if a.size == 1 and a.dtype.kind in "biu":
            return int(a.reshape(()))
        return answer  # not a decision: the engine reports it with its repr

    call.takes_default = with_default
    call.takes_linkage = with_linkage
    return call


def _as_module(m, llvm=None) -> Module:
    if not isinstance(m, Module):
        return Module(m, llvm=llvm)
    if llvm is not None and resolve_llvm(llvm) != m.llvm:
        raise ValueError(f"{m.name}: the module was loaded by LLVM {m.llvm}, not LLVM {resolve_llvm(llvm)} "
                         f"(load it with Module(..., llvm={resolve_llvm(llvm)}))")
    return m


def _codegen_level(module: Module, pipeline: str) -> int:
    if getattr(module, "lto", None) is not None:
        return CODEGEN_LEVEL[module.lto_level]  # lld's --lto-CGO follows --lto-O
    if module.opt_level:
        return CODEGEN_LEVEL[module.opt_level]
    if pipeline.startswith("default<") and pipeline.endswith(">"):
        return CODEGEN_LEVEL.get(pipeline[8:-1], 2)
    return 2  # llc's default


def _forced(decisions) -> str:
    if decisions is None:
        return ""
    if isinstance(decisions, str):
        s = decisions
    else:
        a = np.asarray(decisions).reshape(-1)
        if a.size and (a.dtype.kind not in "biu" or a.min() < 0 or a.max() > 1):
            raise ValueError("forced_decisions must be 0/1 values")
        s = "".join("1" if v else "0" for v in a.tolist())
    if s.strip("01"):
        raise ValueError(f"forced_decisions must be a string of '0' and '1', not {s[:20]!r}")
    return s


FEATURE_UPKEEP = ("mlopt", "llvm")


def _feature_upkeep(value: str) -> str:
    if value not in FEATURE_UPKEEP:
        raise ValueError(f"feature_upkeep must be 'mlopt' or 'llvm', not {value!r}")
    return value


def _parsed_log(log_bytes: bytes) -> tuple[Log | None, np.ndarray, np.ndarray]:
    """A compile's training log parsed (None when empty), its decisions and the heuristic's answers."""
    parsed = read_log(log_bytes) if log_bytes else None
    if parsed is None:
        return None, np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (parsed, parsed[inlining.DECISION].reshape(-1).copy(),
            parsed[inlining.DEFAULT_DECISION].reshape(-1).copy())


def _compile(module: Module, pool, callback, pipeline: str | None, log: bool, codegen: bool,
             keep_object: bool, call_sites: bool = False, cache: TextSizeCache | None = None,
             forced: str = "", vocab: str = "", features: str = "mlopt",
             forced_callees: dict[str, int] | None = None, linkage: bool = False,
             grouped: bool = False) -> CompileResult:
    if cache is not None and not isinstance(cache, TextSizeCache):
        raise TypeError(f"cache must be a TextSizeCache, not {type(cache).__name__}")
    if cache is not None and cache.llvm != module.llvm:
        raise ValueError(f"the TextSizeCache serves LLVM {cache.llvm}; {module.name} is compiled by LLVM "
                         f"{module.llvm}")
    pipeline = pipeline or module.default_pipeline()
    level = _codegen_level(module, pipeline) if codegen else -1
    tri = lambda flag: -1 if flag is None else int(flag)  # noqa: E731
    raw = engine(module.llvm).compile(module._m, pipeline, level, module.target or "", module.reloc_model or "",
                           tri(module.loop_vectorize), tri(module.slp_vectorize), keep_object, call_sites,
                           cache._cache if cache is not None else None, pool, callback, forced, vocab,
                           feature_upkeep=features,
                           callable_default=bool(getattr(callback, "takes_default", False)),
                           forced_callees=forced_callees or {},
                           callable_linkage=bool(getattr(callback, "takes_linkage", False)), log_linkage=linkage,
                           grouped_code=grouped, link_time_codegen=getattr(module, "lto", None) is not None)
    log_bytes = raw["log"]
    parsed, decisions, defaults = _parsed_log(log_bytes)
    return CompileResult(module.name, raw["text_size"], decisions, defaults,
                         parsed if log else None, log_bytes if log else b"",
                         raw["object"], list(raw["warnings"]), raw["call_sites"] if call_sites else None,
                         raw["cache_hit"],
                         None if raw["grouped_code"] is None else [(int(h), int(n)) for h, n in raw["grouped_code"]])


def compile(module: Module | PathLike | bytes, policy: PolicyLike = None, pipeline: str | None = None,
            log: bool = True, *, codegen: bool = True, keep_object: bool = False,
            call_sites: bool = False, cache: TextSizeCache | None = None,
            forced_decisions: str | Sequence[int] | None = None, llvm: int | str | None = None,
            ir2vec_vocab: PathLike | None = None, feature_upkeep: str = "mlopt",
            forced_callees: Mapping[str, int] | None = None,
            log_callee_linkage: bool | None = None, grouped_code: bool = False) -> CompileResult:
    """Optimize ``module`` with ``pipeline`` (default ``default<Oz>``, or the
    corpus element's level) with ``policy`` deciding inlining, then generate
    object code in memory at the level clang would use for it.

    ``policy``: None (LLVM's heuristic), a :func:`mlopt.load_policy` result
    or a path (``.tflite``, model directory, compiled ``.so``), an
    :class:`mlopt.InlinePolicy`, or a callable receiving one call site's 38
    features (int64 array in ``mlopt.problems.inlining.FEATURES`` order) --
    and, with ``ir2vec_vocab``, the float32 embeddings (callee's then
    caller's) as a second array -- and returning 0 or 1: the slow path,
    for experiments. A callable whose attribute ``takes_default`` is true
    also gets the stock heuristic's decision for the site as a 39th
    feature (``inlining_default``); one whose ``takes_linkage`` is true,
    then the callee's linkage class (``callee_linkage``: 0 external,
    1 local, 2 linkonce, 3 available_externally, 4 other). An exception raised by the
    callable stops further calls (the heuristic decides the rest) and is
    re-raised when the compile ends.

    ``cache``: a :class:`TextSizeCache`; a compile whose module, options and
    inlining decisions it has seen skips code generation and takes the
    recorded ``.text`` size (``result.cache_hit``; no object).

    ``forced_decisions``: 0/1 per decision (a sequence or a ``"0110"``
    string): the inliner's first ``len(forced_decisions)`` decisions are
    these, whatever the policy answers; the policy decides the rest (local
    search over decision sequences). ``result.decisions`` is what was done.

    ``forced_callees``: callee name -> 0/1: every site calling that function
    (after the ``forced_decisions``) gets its decision, whatever the policy
    answers ("never inline f"; local search over callees).

    ``llvm``: the LLVM major (19, 22) that compiles a module given as a
    path or bytes (default :func:`mlopt._native.default_llvm`); a
    :class:`Module` is compiled by the major that loaded it.

    ``ir2vec_vocab``: LLVM 22: an IR2Vec vocabulary (seed-embedding JSON);
    the inliner's inputs and the log then end with ``callee_embedding`` and
    ``caller_embedding`` (float [D]) as stock ``opt-22
    -ml-inliner-ir2vec-vocab-file`` computes them. A policy trained with
    embeddings needs it; one trained without runs with or without it.

    ``feature_upkeep``: who keeps the inliner's features up to date after
    each inlining: ``"mlopt"`` (mlopt's upkeep, LLVM 19 and 22 without
    ``ir2vec_vocab``; LLVM's elsewhere) or ``"llvm"`` (LLVM's
    ``MLInlineAdvisor``, which recomputes the caller's dominator tree and
    loop info after every inlining). The features, decisions, logs and
    objects are the same; only the compile time differs.

    ``log_callee_linkage``: the log also has ``callee_linkage`` (int64 [1],
    before ``inlining_default``; not one of LLVM's columns), so it carries
    every input of an ``inlining-linkage`` policy. None (default): when the
    policy takes that input; otherwise LLVM's layout.

    ``grouped_code``: also list the object's code sections in section groups
    (``result.grouped_code``; kept by ``cache`` too): what a package-linked
    objective charges a share of (``mlopt.problems.inlining_linked``).
    """
    vocab = os.fspath(ir2vec_vocab) if ir2vec_vocab else ""
    features = _feature_upkeep(feature_upkeep)
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy, ir2vec_vocab=vocab)
    pool, callback = _resolve_policy(policy, vocab)
    linkage = takes_linkage(policy) if log_callee_linkage is None else bool(log_callee_linkage)
    module = _as_module(module, llvm)
    forced = _forced(forced_decisions)
    by_callee = {name: int(d) for name, d in (forced_callees or {}).items()}  # the engine checks them
    replay = getattr(cache, "replay", None) if codegen and not keep_object else None
    if replay is None or not replay.replayable(policy):
        return _compile(module, pool, callback, pipeline, log, codegen, keep_object, call_sites, cache, forced,
                        vocab, features, by_callee, linkage, grouped_code)
    key = _replay_key(module, pipeline, vocab, linkage, grouped_code)
    hit = replay.lookup(key, policy, forced, call_sites, by_callee)
    if hit is not None:
        return replayed(hit, log, call_sites)
    # decisions forced by callee are checked against the sites' callees: such a compile keeps its call sites
    r = _compile(module, pool, callback, pipeline, True, codegen, keep_object, call_sites or bool(by_callee), cache,
                 forced, vocab, features, by_callee, linkage=linkage, grouped=grouped_code)
    replay.add(key, r)
    return replayed(r, log, call_sites, hit=False)


def _replay_key(module: Module, pipeline: str | None, vocab: str, linkage: bool = False,
                grouped: bool = False) -> tuple:
    """What a compile's trajectory depends on besides its decisions: the
    module's bitcode and how it is compiled (and its log's layout, and
    whether its result lists grouped code)."""
    digest = getattr(module, "_replay_digest", None)
    if digest is None:
        digest = module._replay_digest = hashlib.blake2b(module.bitcode, digest_size=16).digest()
    key = (digest, module.llvm, pipeline or module.default_pipeline(), module.opt_level, module.target,
           module.reloc_model, module.loop_vectorize, module.slp_vectorize, vocab, linkage,
           getattr(module, "lto", None), getattr(module, "lto_level", None))
    return (*key, "grouped") if grouped else key


def compile_many(modules: Iterable[Module | PathLike | bytes], policy: PolicyLike = None,
                 pipeline: str | None = None, log: bool = True, *, threads: int | None = None,
                 codegen: bool = True, keep_object: bool = False, llvm: int | str | None = None,
                 on_result: Callable[[int, CompileResult], None] | None = None,
                 ir2vec_vocab: PathLike | None = None, feature_upkeep: str = "mlopt") -> list[CompileResult]:
    """:func:`compile` for every module, ``threads`` at a time (default: the
    number of CPUs); results in input order, identical to sequential runs.
    Larger modules start first, so one big module does not finish alone at
    the end while the other threads idle. ``on_result(index, result)`` is
    called in the calling thread as each module finishes (for progress)."""
    mods = [_as_module(m, llvm) for m in modules]
    vocab = os.fspath(ir2vec_vocab) if ir2vec_vocab else ""
    features = _feature_upkeep(feature_upkeep)
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy, ir2vec_vocab=vocab)
    pool, callback = _resolve_policy(policy, vocab)
    linkage = takes_linkage(policy)
    run = lambda m: _compile(m, pool, callback, pipeline, log, codegen, keep_object, vocab=vocab,  # noqa: E731
                             features=features, linkage=linkage)
    return map_modules(run, mods, threads, on_result)


def map_modules(run: Callable, mods: Sequence, threads: int | None, on_result: Callable | None) -> list:
    """``run(m)`` for every module, ``threads`` at a time (default: the
    number of CPUs), largest first; results in input order; ``on_result(i,
    result)`` in the calling thread as each finishes."""
    threads = max(1, threads or os.cpu_count() or 1)
    results: list = [None] * len(mods)
    if threads == 1 or len(mods) <= 1:
        for i, m in enumerate(mods):
            results[i] = run(m)
            if on_result:
                on_result(i, results[i])
        return results
    with ThreadPoolExecutor(max_workers=threads) as ex:
        futures = {ex.submit(run, mods[i]): i for i in largest_first(mods)}
        for f in as_completed(futures):
            i = futures[f]
            results[i] = f.result()
            if on_result:
                on_result(i, results[i])
    return results


def largest_first(modules: Sequence) -> list[int]:
    """Indices of ``modules`` (anything with a ``size`` in bytes of bitcode:
    modules, corpus entries) by decreasing size (ties: input order)."""
    sizes = [m.size for m in modules]
    return sorted(range(len(modules)), key=lambda i: (-sizes[i], i))
