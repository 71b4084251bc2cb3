"""Fault injection: an interactive host that dies at random points (before
the header, in the middle of an observation, in the middle of a reply,
after N replies, or by SIGKILL) never hangs or breaks the compiler: opt
exits 0 well within its timeout, warns exactly once, and the heuristic
finishes the module (the host answers with the heuristic's own decision,
so the output must equal stock -Oz whenever the host dies)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

import mlopt
from tests.support.llvm import opt

HOST = r"""
import os, signal, sys
import numpy as np
from mlopt.log import Observation, StreamDecoder

base, mode, n, cut = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
w = os.open(base + ".in", os.O_RDWR)
r = os.open(base + ".out", os.O_RDONLY)
if mode == "before_header":
    os.read(r, cut)
    os._exit(0)
decoder, answered = StreamDecoder(), 0
while True:
    data = os.read(r, 1 if answered >= n else 65536)   # byte by byte near the fault
    if not data:
        os._exit(0)
    for event in decoder.feed(data):
        if not isinstance(event, Observation):
            continue
        if answered == n:
            if mode == "mid_reply":
                os.write(w, np.int64(event["inlining_default"][0]).tobytes()[:cut % 8 or 1])
                os._exit(0)
            if mode == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(0)                                  # after_n
        os.write(w, np.int64(event["inlining_default"][0]).tobytes())
        answered += 1
    if mode == "mid_observation" and answered == n and decoder.has_header:
        os.read(r, cut)                                  # part of the next observation
        os._exit(0)
"""

MODES = ["before_header", "mid_observation", "mid_reply", "after_n", "sigkill"]
TIMEOUT = 10


@pytest.mark.slow
def test_host_dies_at_random_points(llvm_tools, plugin, corpus_modules, tmp_path):
    rng = random.Random(20261122)
    # The smallest modules on which the inliner asks at least 40 times.
    decisions = {m: len(mlopt.inline_features(mlopt.Module(m))) for m in corpus_modules}
    modules = sorted((m for m in corpus_modules if decisions[m] >= 40), key=lambda p: p.stat().st_size)[:8]
    assert len(modules) >= 4
    stock = {}
    for m in modules:
        opt(llvm_tools, m, tmp_path / f"{m.stem}.stock.bc")
        stock[m] = (tmp_path / f"{m.stem}.stock.bc").read_bytes()
    host_script = tmp_path / "host.py"
    host_script.write_text(HOST)
    seen = dict.fromkeys(MODES, 0)
    for run in range(60):
        module = rng.choice(modules)
        mode = MODES[run % len(MODES)]
        n, cut = rng.randrange(0, 35), rng.randrange(1, 400)
        base = str(tmp_path / f"ch{run}")
        os.mkfifo(base + ".in")
        os.mkfifo(base + ".out")
        out = tmp_path / "p.bc"
        start = time.monotonic()
        compiler = subprocess.Popen(
            [llvm_tools["opt"], f"-load-pass-plugin={plugin}", f"-mlopt-inline-interactive={base}",
             "-mlopt-inline-interactive-include-default", f"-mlopt-inline-interactive-timeout={TIMEOUT}",
             "-passes=default<Oz>", str(module), "-o", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        host = subprocess.Popen([sys.executable, str(host_script), base, mode, str(n), str(cut)],
                                stderr=subprocess.PIPE, text=True)
        host.wait(timeout=120)
        _, err = compiler.communicate(timeout=120)
        elapsed = time.monotonic() - start
        what = f"run {run}: {mode} n={n} cut={cut} on {module.name}"
        assert compiler.returncode == 0, f"{what}: opt exited {compiler.returncode}: {err[-1000:]}"
        assert elapsed < TIMEOUT + 20, f"{what}: {elapsed:.1f} s"
        warnings = [line for line in err.splitlines() if line.startswith("warning: mlopt:")]
        # A host that answered every decision before dying leaves nothing to warn about.
        assert len(warnings) <= 1 and len(err.splitlines()) == len(warnings), f"{what}: {err}"
        assert out.read_bytes() == stock[module], what
        seen[mode] += len(warnings)
    assert all(seen[m] >= 10 for m in MODES), seen  # every kind of death happened mid-module
