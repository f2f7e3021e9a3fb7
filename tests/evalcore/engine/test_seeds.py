"""lm-eval 0.4.13's four seeds in the engine: what each one drives, what a run records, and what an
unset seed (``None``) does. The command line's reading of ``--seed`` is compared with lm-eval's own in
tests/evalcore/test_lm_eval_flags.py."""

from __future__ import annotations

import json
import random
import textwrap

import numpy as np
import pytest

from evalcore.cli import main
from evalcore.engine import TaskIndex, evaluate, evaluate_task
from evalcore.engine import runner as runner_module
from evalcore.engine.seeds import Seeds, as_seeds, parse_seed
from evalcore.models.base import Backend, GenerationResult, ModelIdentity


class RecordingBackend(Backend):
    """Answers every generation with the same text and keeps the requests it was sent."""

    name = "recording"

    def __init__(self):
        self.requests = []

    @property
    def identity(self):
        return ModelIdentity("recording", "recording", "0" * 64, "float32", "1")

    def loglikelihood(self, requests, *, progress=None):
        raise AssertionError("not asked")

    def loglikelihood_rolling(self, requests, *, progress=None):
        raise AssertionError("not asked")

    def generate_until(self, requests, *, progress=None):
        self.requests += list(requests)
        return [GenerationResult(" #### 2", 3, "stop") for _ in requests]

    def stream_chat(self, messages, params=None):
        yield "hi"


@pytest.fixture
def sampled(tmp_path):
    """Two sampled generation tasks (2 answers per document) with random few-shot examples."""
    rows = [{"question": f"{a} + {a}?", "answer": f"#### {2 * a}"} for a in range(1, 9)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("s1", "s2"):
        (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(f"""
            task: {name}
            dataset_path: {tmp_path / 'd.jsonl'}
            test_split: train
            fewshot_split: train
            num_fewshot: 2
            output_type: generate_until
            repeats: 2
            doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
            doc_to_target: "{{{{answer}}}}"
            generation_kwargs: {{until: ["Question:"], max_gen_toks: 8, do_sample: true, temperature: 0.7}}
            filter_list:
              - name: strict-match
                filter: [{{function: regex, regex_pattern: "#### (\\\\-?[0-9]+)"}}, {{function: take_first}}]
            metric_list:
              - metric: exact_match
        """))
    return tmp_path, TaskIndex([tmp_path], bundled=False).resolve(["s1", "s2"])[0]


@pytest.fixture
def bootstrap_seeds(monkeypatch):
    """The seeds the runner hands to the bootstrap intervals, one per task."""
    seen = []
    real = runner_module.aggregate

    def spy(config, records, *, seed=0):
        seen.append(seed)
        return real(config, records, seed=seed)

    monkeypatch.setattr(runner_module, "aggregate", spy)
    return seen


def test_each_seed_drives_its_part_and_all_four_are_recorded(sampled, bootstrap_seeds):
    _, tasks = sampled
    backend = RecordingBackend()
    run = evaluate(backend, tasks, limit=3, seed=Seeds(random=11, numpy=22, torch=33, fewshot=44))
    # torch: the sampling seed, per request seed + 1000 * document + repeat (what lm-eval's torch seed
    # governs for HF sampling); the same for every task.
    assert [r.seed for r in backend.requests] == [33, 34, 1033, 1034, 2033, 2034] * 2
    assert bootstrap_seeds == [11, 11]  # random: the bootstrap intervals
    expected = {"random_seed": 11, "numpy_seed": 22, "torch_seed": 33, "fewshot_seed": 44,
                "sampling_seed": 33, "bootstrap_seed": 11}  # fmt: skip
    for task in run.tasks.values():
        assert task.protocol["seeds"] == expected and task.protocol["fewshot_seed"] == 44
    assert run.settings["seed"] == [11, 22, 33, 44] and run.settings["seeds"] == expected
    # fewshot: the sampler's random.Random(44), as in lm-eval
    again = evaluate_task(RecordingBackend(), tasks[0], limit=3, seed=Seeds(random=0, numpy=0, torch=0, fewshot=44))
    other = evaluate_task(RecordingBackend(), tasks[0], limit=3, seed=Seeds(random=11, numpy=22, torch=33, fewshot=45))
    ids = [r["fewshot_ids"] for r in run.tasks["s1"].records]
    assert [r["fewshot_ids"] for r in again.records] == ids != [r["fewshot_ids"] for r in other.records]


def test_unset_seeds_are_drawn_once_per_run_and_recorded(sampled, bootstrap_seeds):
    _, tasks = sampled
    backend = RecordingBackend()
    run = evaluate(backend, tasks, limit=2, seed=parse_seed("None")[0])
    seeds = run.tasks["s1"].protocol["seeds"]
    assert {k: seeds[k] for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")} == dict.fromkeys(
        ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"))  # fmt: skip
    drawn = seeds["sampling_seed"]
    assert isinstance(drawn, int) and isinstance(seeds["bootstrap_seed"], int)
    assert [r.seed for r in backend.requests] == [drawn, drawn + 1, drawn + 1000, drawn + 1001] * 2
    assert run.tasks["s2"].protocol["seeds"] == seeds  # one draw for the whole run
    assert bootstrap_seeds == [seeds["bootstrap_seed"]] * 2
    # Recorded, so the run can be repeated exactly.
    repeat = RecordingBackend()
    evaluate(repeat, tasks, limit=2, seed=Seeds(random=None, numpy=None, torch=drawn, fewshot=None))
    assert [r.seed for r in repeat.requests] == [r.seed for r in backend.requests]


def test_one_integer_keeps_the_engines_old_meaning(sampled, bootstrap_seeds):
    """``evaluate(seed=S)`` (the leaderboard's suite, older callers): random, sampling and bootstrap S,
    few-shot 1234, numpy's generator not touched: the numbers such runs produced are unchanged."""
    _, tasks = sampled
    backend = RecordingBackend()
    run = evaluate(backend, tasks[:1], limit=2, seed=3)
    assert run.tasks["s1"].protocol["seeds"] == {"random_seed": 3, "numpy_seed": None, "torch_seed": 3,
                                                  "fewshot_seed": 1234, "sampling_seed": 3, "bootstrap_seed": 3}  # fmt: skip
    assert [r.seed for r in backend.requests] == [3, 4, 1003, 1004] and bootstrap_seeds == [3]
    assert evaluate_task(RecordingBackend(), tasks[0], limit=2, seed=3, fewshot_seed=9).protocol["fewshot_seed"] == 9
    with pytest.raises(ValueError, match="give the few-shot seed once"):
        as_seeds(Seeds(), 9)
    for bad in (-1, 2**32, True, "3"):
        with pytest.raises(ValueError):
            evaluate(RecordingBackend(), tasks, seed=bad)


def test_task_code_runs_after_python_and_numpy_are_seeded():
    random.seed(99)
    np.random.seed(99)
    Seeds(random=5, numpy=6).seed_globals()
    assert random.random() == random.Random(5).random()
    assert np.random.random() == np.random.RandomState(6).random_sample()
    state = random.getstate(), np.random.get_state()[1].tolist()
    Seeds(random=None, numpy=None).seed_globals()  # None: left alone, as lm-eval leaves it
    assert random.getstate() == state[0] and np.random.get_state()[1].tolist() == state[1]


def test_the_command_line_records_the_four_seeds(sampled, tiny_dir, tmp_path):
    folder, _ = sampled
    out = tmp_path / "out"
    argv = ["run", "--model", "hf", "--model-args", f"path={tiny_dir},dtype=float32,device=cpu", "--tasks", "s1",
            "--include-path", str(folder), "--limit", "2", "--no-progress", "--output-dir", str(out)]  # fmt: skip
    assert main([*argv, "--seed", "1,2,3,None"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert data["settings"]["seed"] == [1, 2, 3, None]
    assert data["protocol"]["s1"]["seeds"]["sampling_seed"] == 3 and data["protocol"]["s1"]["fewshot_seed"] is None
    assert main([*argv, "--fewshot-seed", "7"]) == 0  # lm-eval's default, the few-shot seed replaced
    assert json.loads((out / "results.json").read_text())["settings"]["seed"] == [0, 1234, 1234, 7]
