"""A pool worker whose parent is gone exits quietly (no traceback per task
in the user's terminal after Ctrl-C), and answers while the parent listens."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection


def _worker(parent_listens: bool) -> tuple[subprocess.CompletedProcess, object]:
    task_r, task_w = os.pipe()
    answer_r, answer_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "mlopt.workers.worker", str(task_r), str(answer_w)],
                            pass_fds=(task_r, answer_w), stderr=subprocess.PIPE, text=True)
    os.close(task_r)
    os.close(answer_w)
    inbox = Connection(task_w, readable=False)
    answers = Connection(answer_r, writable=False)
    if not parent_listens:
        answers.close()
    inbox.send((7, abs, -3))
    answer = answers.recv() if parent_listens else None
    inbox.close()
    _, err = proc.communicate(timeout=60)
    if parent_listens:
        answers.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err), answer


def test_a_worker_answers_while_its_parent_listens():
    done, answer = _worker(parent_listens=True)
    assert done.returncode == 0 and done.stderr == ""
    assert answer[:3] == (7, True, 3)


def test_a_worker_whose_parent_is_gone_exits_quietly():
    done, _ = _worker(parent_listens=False)
    assert done.returncode == 0
    assert done.stderr == ""
