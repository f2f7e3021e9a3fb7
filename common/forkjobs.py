"""Run CPU-bound jobs in forked child processes, a few at a time, and collect their results in order.

Threads share one interpreter: numpy releases the GIL in its big loops, but a refit's fits also run
Python loops (online Elo) and many small numpy calls, so two threads on two cores gave about 1.1x.
A forked child starts with the parent's memory (copy on write: the votes' columns are not copied or
pickled); it runs one job, sends the pickled result through a pipe and leaves with ``os._exit``, so it
never runs the parent's exit handlers or touches its database connection. The parent reads every
child's pipe as data arrives (a result larger than a pipe's buffer would otherwise block the child).

Works where ``multiprocessing`` may not: a Celery prefork worker's child is a daemon process, and
``multiprocessing`` refuses to start children from one. Where ``os.fork`` does not exist, or with one
worker, the jobs run here, one after the other.

A job that raises in the child raises here (the same exception where it pickles, else a
:class:`ForkedJobError` with the child's traceback); a child that dies without a result (killed, out of
memory) raises :class:`ForkedJobError` naming its signal or exit status. Jobs must not use the
database or other open connections: they compute, nothing else.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import traceback
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class ForkedJobError(RuntimeError):
    """A job's child process failed without an exception that could be sent back, or died."""


def _child(job: Callable[[], object], write_fd: int) -> None:
    """In the child: run ``job``, write ``(ok, value)`` pickled, and leave without cleanup."""
    status = 0
    try:
        try:
            payload = pickle.dumps((True, job()), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # sent to the parent, which raises it
            try:
                payload = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(payload)
            except BaseException:
                text = "".join(traceback.format_exception(exc))
                payload = pickle.dumps((False, ForkedJobError(f"the job failed in its process:\n{text}")))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view) :]
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _fork(job: Callable[[], object]) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves through os._exit, which coverage cannot follow
        os.close(read_fd)
        _child(job, write_fd)
    os.close(write_fd)
    return pid, read_fd


def _outcome(index: int, pid: int, data: bytes):
    _, status = os.waitpid(pid, 0)
    if not data:
        if os.WIFSIGNALED(status):
            how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            how = f"exited with status {os.waitstatus_to_exitcode(status)}"
        raise ForkedJobError(f"job {index}'s process {how} before sending its result")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


def run_forked(jobs: Sequence[Callable[[], T]], *, workers: int) -> list[T]:
    """``[job() for job in jobs]``, each job in its own forked process, at most ``workers`` at once.

    Start the costliest jobs first for the shortest total time. On the first failure the other running
    children are killed and the failure is raised.
    """
    if workers <= 1 or len(jobs) <= 1 or not hasattr(os, "fork"):
        return [job() for job in jobs]
    results: list = [None] * len(jobs)
    waiting = list(range(len(jobs)))[::-1]
    running: dict[int, tuple[int, int, bytearray]] = {}  # fd -> (index, pid, data so far)
    with selectors.DefaultSelector() as selector:
        try:
            while waiting or running:
                while waiting and len(running) < workers:
                    index = waiting.pop()
                    pid, fd = _fork(jobs[index])
                    running[fd] = (index, pid, bytearray())
                    selector.register(fd, selectors.EVENT_READ)
                for key, _ in selector.select():
                    index, pid, data = running[key.fd]
                    chunk = os.read(key.fd, 1 << 20)
                    if chunk:
                        data += chunk
                        continue
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    del running[key.fd]
                    results[index] = _outcome(index, pid, bytes(data))
        finally:
            for fd, (_, pid, _) in running.items():
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                selector.unregister(fd)
                os.close(fd)
    return results
