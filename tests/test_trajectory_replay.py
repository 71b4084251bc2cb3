"""Trajectory replay (TextSizeCache(replay=True)): a compile whose policy
makes, on an earlier compile's logged features, exactly that compile's
decisions is answered without compiling -- and the answer is what a
compile gives: size, decisions, log bytes, call sites. A policy that
differs at one late call site must be compiled."""

import numpy as np
import pytest

import mlopt


@pytest.fixture(scope="module")
def modules(llvm_tools, corpus_modules):
    return [mlopt.Module(p, opt_level="Oz", reloc_model="pic", llvm=llvm_tools["major"]) for p in corpus_modules]


@pytest.fixture(scope="module")
def policies(modules, tmp_path_factory):
    """A random MLP, and it nudged by 1% and by 10% (what ES compiles):
    many modules get the same decisions, some do not."""
    tmp = tmp_path_factory.mktemp("replay")
    logs = [r.log for r in mlopt.compile_many(modules[:12], threads=2)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=200)
    a = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=5)
    out = [a] + [mlopt.InlinePolicy(vocab, [(w * s, b) for w, b in a.layers]) for s in (1.01, 1.1)]
    return [mlopt.load_policy(p.export(tmp / str(k))) for k, p in enumerate(out)]


def _same(r, full):
    assert r.text_size == full.text_size, r.module
    assert np.array_equal(r.decisions, full.decisions), r.module
    assert np.array_equal(r.default_decisions, full.default_decisions), r.module
    assert r.log_bytes == full.log_bytes, r.module
    assert r.call_sites == full.call_sites, r.module


def test_replayed_compiles_are_the_compiles(modules, policies):
    cache = mlopt.compiler.TextSizeCache()
    replays = 0
    for p in [None, *policies]:
        full = [mlopt.compile(m, p, call_sites=True) for m in modules]
        for m, f in zip(modules, full):
            before = cache.replays
            r = mlopt.compile(m, p, call_sites=True, cache=cache)
            _same(r, f)
            assert r.cache_hit or cache.replays == before
            replays += cache.replays - before
    # The nudged policies repeat the first one's decisions on many modules, and only there.
    assert replays == cache.replays > len(modules) // 2
    no_log = mlopt.compile(modules[0], policies[0], log=False, cache=cache)
    assert no_log.cache_hit and no_log.log is None and no_log.log_bytes == b""


def test_a_numpy_twin_replays_exactly_what_the_model_replays(modules, tmp_path):
    """ES's candidates carry their numpy weights (LoadedPolicy.twin): replay then settles rows in numpy
    and asks the model only about near-ties. The same compiles replay, with the same results."""
    logs = [r.log for r in mlopt.compile_many(modules[:12], threads=2)]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=200)
    a = mlopt.InlinePolicy.random(vocab, hidden=(32, 16), seed=6)
    nets = [a] + [mlopt.InlinePolicy(vocab, [(w * s, b) for w, b in a.layers]) for s in (1.01, 1.1)]
    counts = []
    for twinned in (False, True):
        cache = mlopt.compiler.TextSizeCache()
        hits, loaded = [], []
        for k, net in enumerate(nets):
            p = mlopt.load_policy(net.export(tmp_path / f"{twinned}{k}"))
            if twinned:
                p.twin = net
            loaded.append(p)
            for m in modules:
                r = mlopt.compile(m, p, call_sites=True, cache=cache)
                if twinned:
                    _same(r, mlopt.compile(m, p, call_sites=True))
                hits.append(r.cache_hit)
        counts.append(hits)
        if twinned:
            assert sum(p.twin_rows for p in loaded) > 100
            assert sum(p.model_rows for p in loaded) < sum(p.twin_rows for p in loaded) / 10
    assert counts[0] == counts[1] and sum(counts[1]) > len(modules) // 2


def test_a_policy_that_differs_at_one_late_site_is_compiled(modules, tmp_path):
    """The heuristic as a policy, except that it answers the opposite at
    the last call site of the largest trajectory: replay must not take the
    heuristic's compile for it."""
    cache = mlopt.compiler.TextSizeCache()
    m = max(modules, key=lambda m: len(mlopt.compile(m, log=False).decisions))
    h = mlopt.compile(m, cache=cache)
    n = len(h.decisions)
    assert n > 20
    forced = h.decisions.copy()
    forced[-1] ^= 1
    flipped = mlopt.compile(m, forced_decisions=forced, cache=cache)
    assert not flipped.cache_hit and flipped.decisions[-1] != h.decisions[-1]
    _same(flipped, mlopt.compile(m, forced_decisions=forced))
    # The heuristic's own trajectory, with its decisions forced: a replay of the first compile.
    again = mlopt.compile(m, forced_decisions=h.decisions[: n // 2], cache=cache)
    assert again.cache_hit and np.array_equal(again.decisions, h.decisions)
    assert cache.replays == 1


def test_forced_flips_replay_their_own_compiles(modules):
    """Search forces a prefix and lets the heuristic decide the rest: a
    prefix seen before replays; its result is the uncached compile's."""
    cache = mlopt.compiler.TextSizeCache()
    rng = np.random.default_rng(7)
    checked = 0
    for m in modules[::3]:
        h = mlopt.compile(m, cache=cache)
        if len(h.decisions) < 2:
            continue
        for k in rng.choice(len(h.decisions), size=2, replace=False):
            forced = h.decisions[: k + 1].copy()
            forced[k] ^= 1
            first = mlopt.compile(m, forced_decisions=forced, cache=cache)
            second = mlopt.compile(m, forced_decisions=forced, cache=cache)
            assert second.cache_hit
            _same(first, mlopt.compile(m, forced_decisions=forced))
            _same(second, first)
            checked += 1
    assert checked >= 8


def test_replay_off_and_python_policies_always_compile(modules):
    vocab = mlopt.Vocab.from_logs([mlopt.compile(modules[0]).log], num_buckets=20)
    numpy_policy = mlopt.InlinePolicy.random(vocab, hidden=(8,), seed=1)
    cache = mlopt.compiler.TextSizeCache()
    off = mlopt.compiler.TextSizeCache(replay=False)
    for _ in range(2):
        mlopt.compile(modules[0], numpy_policy, cache=cache)
        mlopt.compile(modules[0], cache=off)
    assert cache.replays == 0 and off.replays == 0 and off.replay is None


def test_the_store_keeps_a_few_trajectories_per_module_and_a_bounded_total():
    """Bookkeeping only (no compiler): at most per_module trajectories per
    key, the most recent first; past max_bytes the least recently used
    modules go."""
    from dataclasses import dataclass, field

    from mlopt.compiler.replay import TrajectoryReplay

    class NoFeatures:
        nbytes = 0

        def __getitem__(self, name):
            raise KeyError(name)

    @dataclass
    class Result:  # the fields of a CompileResult the store reads
        decisions: np.ndarray
        log_bytes: bytes
        default_decisions: np.ndarray = None
        log: object = field(default_factory=NoFeatures)
        call_sites: list | None = None

        def __post_init__(self):
            self.default_decisions = self.decisions  # the heuristic's own trajectory

    def result(bits: str, size: int = 100) -> Result:
        return Result(np.array([int(b) for b in bits], np.int64), b"x" * size)

    store = TrajectoryReplay(per_module=2, max_bytes=3 * (1000 + 256))
    for bits in ("00", "01", "10", "10"):  # the repeated trajectory is kept once
        store.add("a", result(bits, 1000))
    assert len(store) == 2
    assert store.lookup("a", None, "00", False) is None  # the oldest, dropped
    assert store.lookup("a", None, "0", False).decisions.tolist() == [0, 1]
    assert store.lookup("a", None, "1", False).decisions.tolist() == [1, 0]
    store.add("b", result("1", 1000))  # 3 trajectories: at the cap
    store.lookup("a", None, "", False)  # "a" used last
    store.add("c", result("0", 1000))  # over the cap: "b", the least recently used, goes
    assert store.lookup("b", None, "", False) is None
    assert store.lookup("a", None, "", False) is not None and store.lookup("c", None, "", False) is not None
    assert store.replays == 5


def test_a_heuristic_compile_given_to_replay_answers_as_that_compile(modules, policies):
    """TextSizeCache.add_heuristic_compile (what rollouts take from mlopt trace's cache): with the
    heuristic's size and log given, a policy deciding as the heuristic throughout is answered without a
    compile, by what was given; a policy deciding otherwise compiles, to the uncached compile's result."""
    cache = mlopt.compiler.TextSizeCache()
    given = {}
    for m in modules:
        full = mlopt.compile(m)
        assert not cache.knows(m)
        cache.add_heuristic_compile(m, full.text_size, full.log_bytes)
        assert cache.knows(m)
        given[m.name] = full
    for m in modules:
        r = mlopt.compile(m, cache=cache)
        assert r.cache_hit
        _same(r, given[m.name])
    assert cache.replays == len(modules) and cache.misses == 0
    for p in policies[:2]:
        for m in modules:
            _same(mlopt.compile(m, p, cache=cache), mlopt.compile(m, p))
    assert cache.misses > 0  # the random policies differ from the heuristic on some modules
    # What was given is what answers (a size off by one comes back off by one): the compile is not redone.
    m = modules[0]
    other = mlopt.compiler.TextSizeCache()
    other.add_heuristic_compile(m, given[m.name].text_size + 1, given[m.name].log_bytes)
    assert mlopt.compile(m, cache=other).text_size == given[m.name].text_size + 1


def test_a_log_that_is_not_the_heuristics_is_refused(modules):
    m = max(modules, key=lambda m: len(mlopt.compile(m, log=False).decisions))
    h = mlopt.compile(m)
    forced = h.decisions.copy()
    forced[0] ^= 1
    flipped = mlopt.compile(m, forced_decisions=forced)
    cache = mlopt.compiler.TextSizeCache()
    with pytest.raises(ValueError, match="otherwise than inlining_default"):
        cache.add_heuristic_compile(m, flipped.text_size, flipped.log_bytes)
    assert not cache.knows(m)
    off = mlopt.compiler.TextSizeCache(replay=False)
    off.add_heuristic_compile(m, h.text_size, h.log_bytes)  # nothing to give it to
    assert not off.knows(m)


def test_a_twins_inputs_are_made_once_per_trajectory_and_go_with_it():
    """Bookkeeping only (no compiler): the normalized rows a numpy twin checks are made once per kept
    trajectory and vocab, handed to every later check of it (sliced past forced decisions), counted
    in a budget of their own (what trajectories are kept does not change), and dropped with the
    trajectory."""
    from dataclasses import dataclass

    from mlopt.compiler.replay import TrajectoryReplay

    feature = type("Spec", (), {"name": "f"})()
    spec = type("Problem", (), {"features": (feature,)})()

    class Vocab:
        def fingerprint(self):
            return b"v"

    class Twin:
        vocab, widths, problem = Vocab(), (1,), spec
        made = 0

        def normalization_key(self):
            return (self.vocab.fingerprint(), self.widths, ("f",))

        def normalized(self, batch):
            Twin.made += 1
            return np.asarray(batch["f"], np.float32).reshape(-1, 1) * 2

    class Policy:  # decides 1 where twice the feature is above 1
        twin, problem = Twin(), spec
        seen: list = []

        def decide(self, batch, inputs=None):
            Policy.seen.append(None if inputs is None else inputs.copy())
            x = Twin().normalized(batch) if inputs is None else inputs
            return (x[:, 0] > 1).astype(np.int64)

    class Log(dict):
        nbytes = 0

    @dataclass
    class Result:
        decisions: np.ndarray
        log: Log
        log_bytes: bytes = b""
        call_sites: list | None = None
        default_decisions: np.ndarray = None

    store = TrajectoryReplay(per_module=1)
    kept = Result(np.array([0, 1, 1], np.int64), Log(f=np.array([0.0, 1.0, 2.0])))
    store.add("m", kept)
    base = store._bytes
    for forced in ("", "", "0"):
        assert store.lookup("m", Policy(), forced, False) is kept
    assert Twin.made == 1  # made once, for the first check
    assert [s.ravel().tolist() for s in Policy.seen] == [[0, 2, 4], [0, 2, 4], [2, 4]]
    assert store._bytes == base and store._input_bytes == 3 * 4  # a budget of their own: trajectories kept as before
    store.add("m", Result(np.array([1], np.int64), Log(f=np.array([3.0]))))  # replaces it (per_module 1)
    assert not store._inputs and store._input_bytes == 0 and store._bytes == 256  # gone with their trajectory
