"""common.forkjobs: jobs in forked processes, results in order, failures raised, no child left behind."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from common.forkjobs import ForkedJobError, run_forked

BIG = np.arange(3_000_000, dtype=np.float64)  # inherited by the children, never pickled to them


def _children() -> set[int]:
    """This process's live (or unreaped) children, from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.add(int(entry))
    return found


def _own_pid(k):
    return k, os.getpid()


def test_results_come_back_in_order_from_other_processes():
    before = _children()
    jobs = [lambda k=k: _own_pid(k) for k in range(7)]
    results = run_forked(jobs, workers=3)
    assert [k for k, _ in results] == list(range(7))
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids and len(pids) == 7
    assert _children() == before


def test_a_large_result_through_the_pipe_and_inherited_memory():
    """Several MB per result (more than a pipe holds): the parent reads while the children write."""
    results = run_forked([lambda s=s: BIG[s::4] * 2 for s in range(4)], workers=2)
    for s, got in enumerate(results):
        np.testing.assert_array_equal(got, BIG[s::4] * 2)


def test_an_exception_in_a_job_is_raised_here_and_the_others_are_stopped():
    before = _children()

    def bad():
        raise ValueError("no finite MLE in job 2")

    jobs = [lambda: os.getpid(), lambda: __import__("time").sleep(600), bad]
    with pytest.raises(ValueError, match="no finite MLE in job 2"):
        run_forked(jobs, workers=3)
    assert _children() == before  # the sleeping child was killed and reaped


def test_an_exception_that_does_not_pickle_comes_back_as_text():
    class Local(Exception):  # a local class cannot be pickled by reference
        pass

    def bad():
        raise Local("odd failure")

    with pytest.raises(ForkedJobError, match="odd failure"):
        run_forked([bad, lambda: 1], workers=2)


def test_a_child_that_dies_is_named():
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(ForkedJobError, match="job 1's process was killed by SIGKILL"):
        run_forked([lambda: 1, die], workers=2)

    def leave():
        os._exit(3)

    with pytest.raises(ForkedJobError, match="exited with status 3"):
        run_forked([leave, lambda: 1], workers=2)


def test_one_worker_or_one_job_runs_here():
    assert run_forked([lambda: os.getpid()], workers=4) == [os.getpid()]
    assert run_forked([lambda: os.getpid(), lambda: 2], workers=1) == [os.getpid(), 2]
    assert run_forked([], workers=4) == []
