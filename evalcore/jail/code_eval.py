"""Hugging Face ``evaluate``'s ``code_eval`` metric, with every program run in Podium's jail.

The harness's code tasks (humaneval, mbpp and their variants) score generations in their
``utils.py`` with ``evaluate.load("code_eval")``: a hub script that ``exec``-s each program in a
child process of the evaluating one (``execute.py`` of huggingface/evaluate, whose own docstring
says it is not a sandbox). When Podium imports such trusted task code,
:func:`jailed_evaluate` stands in for the ``evaluate`` module during the import: its
``load("code_eval")`` returns :class:`JailedCodeEval`, the same computation with each program run
in the bubblewrap jail (:func:`evalcore.jail.verdicts.run_tests`); every other name goes to the
real ``evaluate`` where it is installed.

Semantics kept from the hub script (``metrics/code_eval/code_eval.py`` and ``execute.py``,
huggingface/evaluate a7dd338, Apache-2.0): the program is ``candidate + "\\n" + test_case``; it is
``exec``-ed in an empty namespace (``__name__`` is not ``"__main__"``) in a fresh temporary
directory, after the same ``reliability_guard`` (``os.kill``, ``os.system``, ``subprocess.Popen``,
... set to ``None``), with stdout and stderr swallowed and stdin unreadable, under a
``setitimer`` limit of ``timeout`` seconds; the result is ``"passed"``, ``"timed out"`` or
``"failed: <exception>"``, and a program that reports nothing (killed, ``os._exit``) counts as
``"timed out"``, as there. ``pass@k`` is the unbiased estimator averaged over problems, reported
only for the ``k`` every problem has enough samples for. What differs is the place: the jail's
Python is the system one under ``/usr``, with the jail's limits (memory, processes, no network); and
who decides: the candidate and the test run in two processes, the test's process alone writing the
result from plain values (:mod:`evalcore.jail.verdicts`), so that a candidate that patches the
interpreter, registers exit hooks or returns always-equal objects cannot turn a failure into
``"passed"``. The hub's exact strings hold for every program that does not attack its checker.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from evalcore.jail.verdicts import TestVerdict, report_tampering, run_tests

MEMORY_MB = 2048  # the hub script sets no memory limit; the jail needs one
_USERS: set[str] = set()  # task-code modules that loaded code_eval through jailed_evaluate


def check_candidate(candidate: str, test: str, *, timeout: float = 3.0) -> TestVerdict:
    """One program scored as code_eval's ``check_correctness`` scores it, in the jail: the verdict, whose
    ``result`` is the hub's string. The candidate runs in its own process, the test in the referee's
    (:mod:`evalcore.jail.verdicts`), both under code_eval's ``reliability_guard``, in an empty
    namespace, with output swallowed and stdin unreadable."""
    return run_tests(candidate, test, timeout=float(timeout), memory_mb=MEMORY_MB, guard=True, main=False)


def estimate_pass_at_k(num_samples: np.ndarray, num_correct: np.ndarray, k: int) -> np.ndarray:
    """The unbiased pass@k per problem, ``1 - C(n - c, k) / C(n, k)`` (Chen et al., 2021), computed as a
    product of ratios so that large ``n`` never overflows; shape (problems,)."""
    out = np.ones(len(num_samples))
    for row, (n, c) in enumerate(zip(num_samples, num_correct)):
        failures = int(n) - int(c)
        if failures >= k:  # else every draw of k holds a correct sample
            out[row] = 1.0 - float(np.prod(1.0 - k / np.arange(failures + 1, int(n) + 1)))
    return out


class JailedCodeEval:
    """The object ``evaluate.load("code_eval")`` returns, with ``compute`` running programs in the jail."""

    name = "code_eval"

    def compute(self, *, predictions, references, k=(1, 10, 100), num_workers: int = 4, timeout: float = 3.0):
        """``(pass_at_k, results)`` as the hub script returns them.

        ``predictions``: one list of candidate programs per problem; ``references``: one test
        program per problem. ``results`` maps each problem's index to ``[(completion_id, result)]``.
        """
        if len(predictions) != len(references):
            raise ValueError(f"code_eval: {len(predictions)} predictions for {len(references)} references")
        # The hub script's features: a list of strings per problem, one string per reference.
        if not all(isinstance(c, list | tuple) and all(isinstance(p, str) for p in c) for c in predictions):
            raise ValueError("code_eval: each prediction must be a list of candidate programs (strings)")
        if not all(isinstance(r, str) for r in references):
            raise ValueError("code_eval: each reference must be a test program (a string)")
        jobs = [(task_id, completion_id, candidate, test)
                for task_id, (candidates, test) in enumerate(zip(predictions, references))
                for completion_id, candidate in enumerate(candidates)]  # fmt: skip
        with ThreadPoolExecutor(max_workers=max(1, int(num_workers))) as pool:
            verdicts = list(pool.map(lambda job: check_candidate(job[2], job[3], timeout=timeout), jobs))
        report_tampering(verdicts)
        results: dict[int, list] = {}
        for (task_id, completion_id, _, _), verdict in zip(jobs, verdicts):
            results.setdefault(task_id, []).append(
                (completion_id, {"task_id": task_id, "passed": verdict.passed, "result": verdict.result,
                                 "completion_id": completion_id})
            )  # fmt: skip
        total = np.array([len(rows) for rows in results.values()])
        correct = np.array([sum(r[1]["passed"] for r in rows) for rows in results.values()])
        ks = [k] if isinstance(k, int) else list(k)
        pass_at_k = {
            f"pass@{n}": estimate_pass_at_k(total, correct, n).mean() for n in ks if (total >= n).all()
        }
        return pass_at_k, results


def uses_code_eval(module_name: str) -> bool:
    """Whether task-code module ``module_name`` loaded code_eval through :func:`jailed_evaluate`."""
    return module_name in _USERS


@contextmanager
def jailed_evaluate(module_name: str) -> Iterator[None]:
    """While task code ``module_name`` is imported, ``import evaluate`` gives the jailed stand-in."""
    try:
        real = importlib.import_module("evaluate")
    except ImportError:
        real = None
    sys.modules["evaluate"] = _stand_in(module_name, real)
    try:
        yield
    finally:
        if real is None:
            sys.modules.pop("evaluate", None)
        else:
            sys.modules["evaluate"] = real


def _stand_in(module_name: str, real) -> types.ModuleType:
    stand_in = types.ModuleType("evaluate", "Podium's evaluate: code_eval runs in the jail")

    def load(path, *args, **kwargs):
        if str(path).rstrip("/").split("/")[-1] == "code_eval":
            _USERS.add(module_name)
            return JailedCodeEval()
        return _needs(real).load(path, *args, **kwargs)

    stand_in.load = load
    stand_in.__getattr__ = lambda name: getattr(_needs(real), name)
    return stand_in


def _needs(real):
    if real is None:
        raise ValueError(
            "task code needs Hugging Face evaluate for a metric other than code_eval: pip install evaluate"
        )
    return real
