"""Scale-out as a user runs it: a Ray cluster of a head and a second node
started with ``ray start`` on this machine (loopback addresses, see
tests/support/ray_cluster.py) runs a trainer's iteration with the same
result bytes as the local pool, and survives the second node being killed
in the middle of the iteration. Every trainer with the common interface
(``Trainer(policy, train, baseline, run_dir, config, validation=, pool=)``,
``run()``, ``theta``) is covered: ES, and PPO where mlopt has it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time

import pytest

from mlopt.problems import inlining
from mlopt.rollouts import trace_corpus
from mlopt.training import train_bc
from tests.support.ray_cluster import RayCluster

pytestmark = pytest.mark.slow

TRAINERS = ["es"] + (["ppo"] if importlib.util.find_spec("mlopt.training.ppo") else [])


@pytest.fixture(scope="module")
def setup(mini_corpus):
    from mlopt.corpus import corpus_entries

    ds = trace_corpus(mini_corpus, use_cache=False, workers=2, quiet=True)
    bc = train_bc(ds, inlining.PROBLEM, epochs=5, hidden=(16,), heldout_fraction=0.0)
    return bc.policy, corpus_entries(mini_corpus), {m: int(s) for m, s in zip(ds.modules, ds.text_size)}


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the driver's, as the nodes'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # the nodes import this mlopt
    with RayCluster(env) as c:
        yield c


def test_the_cluster_never_takes_a_port_ray_start_reserves_for_itself():
    """The GCS and node ports are chosen by the OS; one that Ray's ``ray start``
    also takes by default (52365, the dashboard agent's) made it refuse in CI."""
    from ray._private import ray_constants

    from tests.support.ray_cluster import RAY_DEFAULT_PORTS, _free_ports

    for port in (ray_constants.DEFAULT_PORT, ray_constants.DEFAULT_DASHBOARD_PORT,
                 ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT, 10001, 10002, 19999):
        assert port in RAY_DEFAULT_PORTS
    ports = {p for _ in range(200) for p in _free_ports(2)}
    assert not ports & RAY_DEFAULT_PORTS


def _trainer(kind: str, setup, run, pool):
    policy, entries, baseline = setup
    run.mkdir()
    if kind == "es":
        from mlopt.training import ESConfig, ESTrainer

        cfg = ESConfig(iterations=1, perturbations=2, modules_per_perturbation=3, sigma=0.5, seed=3)
        return ESTrainer(policy, entries[:5], baseline, run, cfg, validation=entries[5:], pool=pool)
    from mlopt.training.ppo import PPOConfig, PPOTrainer

    cfg = PPOConfig(iterations=1, modules=4, epochs=1, seed=3)
    return PPOTrainer(policy, entries[:5], baseline, run, cfg, validation=entries[5:], pool=pool)


def _outcome(trainer) -> tuple[bytes, list[dict]]:
    """The trained parameters' bytes and the metrics without timings and cache hits (both depend on
    which worker compiled what, not on the result)."""
    metrics = [{k: v for k, v in json.loads(line).items()
                if "per_s" not in k and "seconds" not in k and "cache_hit" not in k}
               for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    return trainer.theta.tobytes(), metrics


def _local(kind, setup, tmp_path):
    from mlopt.workers import make_pool

    with make_pool(2) as pool:
        trainer = _trainer(kind, setup, tmp_path / "local", pool)
        trainer.run()
    return _outcome(trainer)


@pytest.mark.parametrize("kind", TRAINERS)
def test_an_iteration_on_a_two_node_cluster_gives_the_local_pools_bytes(kind, setup, cluster, tmp_path):
    from mlopt.workers import make_pool

    local = _local(kind, setup, tmp_path)
    with make_pool(ray=cluster.address, timeout=300) as pool:
        assert pool.workers == 2  # one CPU on each node
        trainer = _trainer(kind, setup, tmp_path / "cluster", pool)
        trainer.run()
    assert _outcome(trainer) == local
    assert trainer.iteration == 1 and local[1][-1]["iteration"] == 1
    from mlopt.training.es import flatten

    assert local[0] != flatten(setup[0]).tobytes()  # the iteration moved the policy


@pytest.mark.parametrize("kind", TRAINERS)
def test_a_node_killed_mid_iteration_is_survived_with_the_same_bytes(kind, setup, cluster, tmp_path):
    from mlopt.workers import make_pool

    local = _local(kind, setup, tmp_path)
    killed = []
    with make_pool(ray=cluster.address, timeout=300) as pool:
        # A task of the iteration must be caught running on the second node (polled every 20 ms); an
        # iteration whose tasks there all finished between two polls is run again, on a new run directory.
        for attempt in range(3):
            trainer = _trainer(kind, setup, tmp_path / f"cluster{attempt}", pool)
            errors = []

            def train(trainer=trainer, errors=errors):
                try:
                    trainer.run()
                except BaseException as e:  # re-raised below
                    errors.append(e)

            thread = threading.Thread(target=train)
            thread.start()
            deadline = time.monotonic() + 600
            while thread.is_alive() and time.monotonic() < deadline:
                if not killed and cluster.busy_on_node():
                    cluster.kill_node()  # a task of the iteration runs there: the machine fails
                    killed.append(time.monotonic())
                time.sleep(0.02)
            thread.join(timeout=60)
            assert not thread.is_alive(), "the iteration did not finish within 10 minutes"
            assert not errors, errors
            if killed:
                break
    assert killed, "no task ran on the second node in 3 iterations"
    assert cluster.node_processes() == []  # it stayed dead
    assert _outcome(trainer) == local
