"""The plugin's interactive mode: stock bytes, correct default, never a hang."""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np

import mlopt
from mlopt.compiler.interactive import Host
from mlopt.problems import inlining as inliner


def policy(obs):
    return int(obs["cost_estimate"][0] < 0)


def plugin_cmd(llvm_tools, plugin, module, out, *extra):
    return [llvm_tools["opt"], f"-load-pass-plugin={plugin}", "-mlopt-inline-interactive={channel}",
            *extra, "-passes=default<Oz>", str(module), "-o", str(out)]


def stock_cmd(llvm_tools, module, out):
    return [llvm_tools["opt"], "-passes=default<Oz>", "-enable-ml-inliner=release",
            "-inliner-interactive-channel-base={channel}", str(module), "-o", str(out)]


def test_same_bytes_as_stock_interactive(llvm_tools, plugin, corpus_modules, tmp_path):
    for module in corpus_modules[:6]:
        mine = Host(policy, timeout=300, capture=True).run(plugin_cmd(llvm_tools, plugin, module, tmp_path / "p.bc"))
        stock = Host(policy, timeout=300, capture=True).run(stock_cmd(llvm_tools, module, tmp_path / "s.bc"))
        assert mine.returncode == stock.returncode == 0, mine.stderr + stock.stderr
        assert mine.streams == stock.streams, module.name
        assert (tmp_path / "p.bc").read_bytes() == (tmp_path / "s.bc").read_bytes()


def test_include_default_is_the_heuristic(llvm_tools, plugin, corpus_modules, tmp_path):
    """Answering with the offered inlining_default reproduces stock -Oz, and
    callee_basic_block_count is intact (19.1.7 overwrites it)."""
    module = corpus_modules[0]
    result = Host(lambda o: o["inlining_default"][0], timeout=300, capture=True).run(
        plugin_cmd(llvm_tools, plugin, module, tmp_path / "p.bc", "-mlopt-inline-interactive-include-default"))
    assert result.returncode == 0, result.stderr
    subprocess.run([llvm_tools["opt"], "-passes=default<Oz>", str(module), "-o", str(tmp_path / "s.bc")], check=True)
    assert (tmp_path / "p.bc").read_bytes() == (tmp_path / "s.bc").read_bytes()
    log = mlopt.read_log(result.streams[0])
    assert log.feature_names == [*inliner.FEATURES, inliner.DEFAULT_DECISION]
    assert set(np.unique(log["inlining_default"])) == {0, 1}
    stock = Host(lambda o: 0, timeout=300, capture=True).run(stock_cmd(llvm_tools, module, tmp_path / "z.bc"))
    first = mlopt.read_log(stock.streams[0])
    # The first decision sees the same module in both runs: every feature of
    # it matches stock's row, column 25 included.
    for name in inliner.FEATURES:
        assert log[name][0] == first[name][0], name
    # 19.1.7's bug would leave only 0/1 (the default decision) in column 25.
    assert np.count_nonzero(log["callee_basic_block_count"] > 1) > 0


class RawHost:
    """A host that misbehaves on purpose."""

    def __init__(self, tmp_path):
        self.base = str(tmp_path / "ch")
        os.mkfifo(self.base + ".in")
        os.mkfifo(self.base + ".out")

    def start(self, cmd):
        argv = [a.replace("{channel}", self.base) for a in cmd]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def finish(self, limit):
        _, err = self.proc.communicate(timeout=limit)
        return self.proc.returncode, err, time.monotonic() - self.t0


def test_host_dies_mid_module(llvm_tools, plugin, corpus_modules, tmp_path):
    """The host answers with the heuristic for 20 decisions, then dies: opt
    exits 0, warns once, and the module equals stock -Oz (the heuristic
    finished it)."""
    module = corpus_modules[0]
    host = RawHost(tmp_path)
    to_opt = os.open(host.base + ".in", os.O_RDWR)
    host.start(plugin_cmd(llvm_tools, plugin, module, tmp_path / "p.bc",
                          "-mlopt-inline-interactive-include-default", "-mlopt-inline-interactive-timeout=20"))
    from_opt = os.open(host.base + ".out", os.O_RDONLY)
    stream = mlopt.LogStream(from_opt)
    for i, obs in enumerate(stream):
        if i == 20:
            break
        os.write(to_opt, np.int64(obs["inlining_default"][0]).tobytes())
    os.close(to_opt)  # the host is gone
    os.close(from_opt)
    rc, err, elapsed = host.finish(60)
    assert rc == 0 and elapsed < 20
    assert err.count("warning: mlopt: interactive host") == 1, err
    assert "finishing with the default inliner heuristic" in err
    subprocess.run([llvm_tools["opt"], "-passes=default<Oz>", str(module), "-o", str(tmp_path / "s.bc")], check=True)
    assert (tmp_path / "p.bc").read_bytes() == (tmp_path / "s.bc").read_bytes()


def test_killed_host_process(llvm_tools, plugin, corpus_modules, tmp_path):
    """A real host process killed with SIGKILL mid-module."""
    module = corpus_modules[0]
    script = (
        "import os, sys, numpy as np, mlopt\n"
        "base = sys.argv[1]\n"
        "w = os.open(base + '.in', os.O_RDWR)\n"
        "r = os.open(base + '.out', os.O_RDONLY)\n"
        "for i, obs in enumerate(mlopt.LogStream(r)):\n"
        "    if i == 5:\n"
        "        os.kill(os.getpid(), 9)\n"
        "    os.write(w, np.int64(1).tobytes())\n"
    )
    host = RawHost(tmp_path)
    host.start(plugin_cmd(llvm_tools, plugin, module, tmp_path / "p.bc", "-mlopt-inline-interactive-timeout=20"))
    child = subprocess.Popen(["python3", "-c", script, host.base])
    assert child.wait(timeout=60) == -9
    rc, err, elapsed = host.finish(60)
    assert rc == 0 and elapsed < 20 and "closed the channel" in err


def test_stalled_host_times_out(llvm_tools, plugin, corpus_modules, tmp_path):
    module = corpus_modules[0]
    host = RawHost(tmp_path)
    to_opt = os.open(host.base + ".in", os.O_RDWR)
    host.start(plugin_cmd(llvm_tools, plugin, module, tmp_path / "p.bc", "-mlopt-inline-interactive-timeout=1"))
    from_opt = os.open(host.base + ".out", os.O_RDONLY)  # connected, never answers
    rc, err, elapsed = host.finish(60)
    os.close(to_opt)
    os.close(from_opt)
    assert rc == 0 and 1 <= elapsed < 15
    assert "no reply within 1.000 s" in err and err.count("warning: mlopt") == 1


def test_host_never_connects(llvm_tools, plugin, corpus_modules, tmp_path):
    host = RawHost(tmp_path)
    host.start(plugin_cmd(llvm_tools, plugin, corpus_modules[0], tmp_path / "p.bc",
                          "-mlopt-inline-interactive-timeout=1"))
    rc, err, elapsed = host.finish(60)
    assert rc == 0 and elapsed < 15 and "no reader opened" in err
