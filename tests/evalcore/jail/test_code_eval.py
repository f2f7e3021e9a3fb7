"""evaluate's code_eval in the jail gives what the hub's own script gives, program by program.

The hub script (``data/harness_tasks/hub_code_eval``, unchanged from huggingface/evaluate) runs the
fixed programs below in child processes of this one, as it does in the harness; Podium's stand-in
runs them in the bubblewrap jail. Both must report the same result string for each program and
the same pass@k.
"""

import importlib
import importlib.util
import sys
import textwrap

import pytest

from evalcore.engine import load_config_file
from evalcore.jail.code_eval import JailedCodeEval, uses_code_eval
from tests.evalcore.engine.harness_cases import HUB_CODE_EVAL

# (candidate, test): every way a program ends that code_eval tells apart.
PROGRAMS = [
    ("def f(x):\n    return x + 1", "assert f(1) == 2"),  # passed
    ("def f(x):\n    return x", "assert f(1) == 2"),  # failed: (an AssertionError without message)
    ("def f(x):\n    raise ValueError('boom')", "f(1)"),  # failed: boom
    ("import os", "os.system('true')"),  # reliability_guard: os.system is None
    ("print('noise')\nimport sys\nprint('more', file=sys.stderr)", "assert True"),  # output swallowed: passed
    ("x = input()", "assert x"),  # stdin unreadable: failed
    ("if __name__ == '__main__':\n    raise SystemExit(1)", "assert True"),  # not __main__: passed
    ("import os", "os._exit(0)"),  # reports nothing: timed out
    ("while True:\n    pass", "assert False"),  # over the time limit: timed out
    ("import subprocess", "subprocess.Popen(['true'])"),  # Popen is None
]
# Two candidates for one test: pass@1 and pass@2 over problems with n = 2.
TWO = [
    ["def g():\n    return 1", "def g():\n    return 2"],
    ["def g():\n    return 3", "def g():\n    return 4"],
]
TWO_TESTS = ["assert g() == 2", "assert g() == 5"]


def _hub_code_eval(monkeypatch):
    if importlib.util.find_spec("evaluate") is None:
        pytest.fail(
            "the hub's code_eval script needs evaluate: install the dev extra (pip install -e '.[dev]')"
        )
    evaluate = importlib.import_module("evaluate")
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")
    return evaluate.load(str(HUB_CODE_EVAL))


def _strings(results) -> dict:
    return {task: [r[1]["result"] for r in sorted(rows)] for task, rows in results.items()}


@pytest.mark.slow
def test_jailed_code_eval_reports_what_the_hub_script_reports(monkeypatch):
    hub = _hub_code_eval(monkeypatch)
    predictions, references = [[c] for c, _ in PROGRAMS], [t for _, t in PROGRAMS]
    theirs, their_results = hub.compute(predictions=predictions, references=references, k=[1], timeout=1.0)
    ours, our_results = JailedCodeEval().compute(
        predictions=predictions, references=references, k=[1], timeout=1.0
    )
    assert _strings(our_results) == _strings(their_results)
    assert _strings(our_results)[0] == ["passed"] and _strings(our_results)[8] == ["timed out"]
    assert ours == pytest.approx(theirs) and ours["pass@1"] == pytest.approx(3 / len(PROGRAMS))
    theirs, _ = hub.compute(predictions=TWO, references=TWO_TESTS, k=[1, 2, 3])
    ours, _ = JailedCodeEval().compute(predictions=TWO, references=TWO_TESTS, k=[1, 2, 3])
    assert ours == pytest.approx(theirs) == {"pass@1": 0.25, "pass@2": 0.5}  # no pass@3: n = 2


def test_jailed_code_eval_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="2 predictions for 1 references"):
        JailedCodeEval().compute(predictions=[["a"], ["b"]], references=["c"])
    with pytest.raises(ValueError, match="list of candidate programs"):
        JailedCodeEval().compute(predictions=["def f(): pass"], references=["f()"])


def _task(folder, utils: str, metric: str):
    (folder / "utils.py").write_text(textwrap.dedent(utils))
    (folder / "t.yaml").write_text(
        "task: code\ndataset_path: json\ndoc_to_text: q\nunsafe_code: true\n"
        f"metric_list: [{{metric: !function utils.{metric}, k: [1]}}]\n"
    )
    return folder / "t.yaml"


def test_unsafe_task_code_scores_through_code_eval_in_the_jail_or_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # The real package, imported first (another test may or may not have imported it in this process):
    # the stand-in must be in sys.modules for the task file's import only.
    before = importlib.import_module("evaluate")
    uses = _task(tmp_path / "a", """
        import evaluate as hf_evaluate
        compute_ = hf_evaluate.load("code_eval")
        def pass_at_k(references, predictions, k=None):
            return compute_.compute(references=references, predictions=predictions, k=k)[0]
    """, "pass_at_k")  # fmt: skip
    config = load_config_file(uses, trusted=True)
    function = config.get("metric_list")[0]["metric"]
    assert isinstance(function.function.__globals__["compute_"], JailedCodeEval)
    assert uses_code_eval(function.function.__module__)
    assert sys.modules.get("evaluate") is before  # the stand-in was there for the import only
    assert function(references=["assert f() == 1"], predictions=[["def f():\n    return 1"]], k=[1]) == {
        "pass@1": 1.0
    }
    own = _task(tmp_path / "b", """
        def run(references, predictions, k=None):
            exec(predictions[0][0] + references[0])
            return 1.0
    """, "run")  # fmt: skip
    with pytest.raises(ValueError, match="outside the jail"):
        load_config_file(own, trusted=True)
    with pytest.raises(ValueError, match="trusted task folders"):
        load_config_file(uses, trusted=False)
