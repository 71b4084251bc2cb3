"""Drive a compiler's MLGO interactive mode from a Python policy.

LLVM's interactive model runner writes observations to ``<base>.out`` and
blocks reading the advice from ``<base>.in``. This host makes both FIFOs,
starts the compiler, and answers each observation with ``policy(obs)``::

    host = mlopt.interactive.Host(lambda obs: int(obs["cost_estimate"][0] < 0))
    result = host.run(["opt-19", "-passes=default<Oz>", "-enable-ml-inliner=release",
                       "-inliner-interactive-channel-base={channel}", "in.bc", "-o", "out.bc"])

Unlike LLVM's reference host it cannot deadlock on the open order (``.in`` is
opened read-write, so neither side waits for the other), drains the
compiler's stdout and stderr while the session runs, accepts consecutive
context records and several inliner sessions (each re-sends a header), sends
advice of any tensor type (int64 for the inliner, float for regalloc
priority), and kills the compiler when ``timeout`` passes.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InteractiveError
from ..log import Observation, StreamDecoder, StreamHeader

Policy = Callable[[Observation], object]


@dataclass
class InteractiveResult:
    returncode: int | None
    stdout: bytes
    stderr: str
    decisions: list = field(default_factory=list)
    sessions: int = 0
    streams: list[bytes] = field(default_factory=list)
    timed_out: bool = False

    @property
    def observations(self) -> int:
        return len(self.decisions)


def _drain(stream, sink: list) -> threading.Thread:
    def run():
        for chunk in iter(lambda: stream.read(65536), b""):
            sink.append(chunk)
        stream.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _encode_advice(spec, value) -> bytes:
    arr = np.asarray(value)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    arr = arr.astype(spec.dtype, copy=False).reshape(-1)
    if arr.size != spec.element_count:
        raise InteractiveError(
            f"policy returned {arr.size} values; advice {spec.name!r} has shape {list(spec.shape)}"
        )
    return np.ascontiguousarray(arr).tobytes()


class Host:
    """Answers a compiler's interactive-mode observations with ``policy``.

    ``policy(obs)`` gets an :class:`mlopt.Observation` (``obs["callee_users"]``,
    ``obs.context``, ``obs.id``) and returns the advice (e.g. 0/1).
    """

    def __init__(self, policy: Policy, *, timeout: float = 600.0, capture: bool = False):
        self.policy = policy
        self.timeout = timeout
        self.capture = capture

    def run(self, command: Sequence[str] | Callable[[str], Sequence[str]]) -> InteractiveResult:
        """Runs the compiler; ``{channel}`` in its arguments is the channel base."""
        workdir = tempfile.mkdtemp(prefix="mlopt-channel-")
        base = os.path.join(workdir, "channel")
        try:
            return self._run(command, base)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, command, base: str) -> InteractiveResult:
        if callable(command):
            argv = list(command(base))
        else:
            argv = [a.replace("{channel}", base) for a in command]
        os.mkfifo(base + ".in")
        os.mkfifo(base + ".out")
        to_compiler = os.open(base + ".in", os.O_RDWR)
        from_compiler = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK)
        out_chunks: list[bytes] = []
        err_chunks: list[bytes] = []
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        drains = [_drain(proc.stdout, out_chunks), _drain(proc.stderr, err_chunks)]
        result = InteractiveResult(None, b"", "")
        deadline = time.monotonic() + self.timeout
        decoder, raw = StreamDecoder(), []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    result.timed_out = True
                    proc.kill()
                    break
                ready, _, _ = select.select([from_compiler], [], [], min(remaining, 0.1))
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                data = os.read(from_compiler, 1 << 16)
                if not data:
                    # The session closed its end: finish it, and listen for another
                    # (a new fd first, so a reopening compiler always finds a reader).
                    if decoder.has_header:
                        decoder.finish()
                        result.sessions += 1
                        result.streams.append(b"".join(raw))
                    decoder, raw = StreamDecoder(), []
                    fresh = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK)
                    os.close(from_compiler)
                    from_compiler = fresh
                    if proc.poll() is not None:
                        break
                    continue
                if self.capture:
                    raw.append(data)
                for event in decoder.feed(data):
                    if isinstance(event, StreamHeader):
                        if event.schema.advice is None:
                            raise InteractiveError("the compiler's stream has no advice spec")
                    elif isinstance(event, Observation):
                        advice = self.policy(event)
                        os.write(to_compiler, _encode_advice(event.schema.advice, advice))
                        result.decisions.append(advice)
        except BaseException:
            proc.kill()
            raise
        finally:
            try:
                result.returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                result.timed_out = True
                proc.kill()
                result.returncode = proc.wait()
            for t in drains:
                t.join(timeout=5)
            os.close(from_compiler)
            os.close(to_compiler)
        if decoder.has_header:  # a session cut off by the compiler's exit
            result.sessions += 1
            result.streams.append(b"".join(raw))
        result.stdout = b"".join(out_chunks)
        result.stderr = b"".join(err_chunks).decode(errors="replace")
        return result


__all__ = ["Host", "InteractiveError", "InteractiveResult"]
