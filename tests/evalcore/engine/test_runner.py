"""The runner end to end with a scripted backend: results JSON, samples, re-scoring, cache, CLI."""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from evalcore.cli import main
from evalcore.engine import TaskIndex, evaluate, load_config_file, read_samples, rescore, run_tasks, write_run
from evalcore.engine.cache import CachedBackend, RequestCache
from evalcore.engine.results import read_results
from evalcore.models.base import Backend, GenerationResult, LoglikelihoodResult, ModelIdentity, RollingResult


class ScriptedBackend(Backend):
    """Deterministic answers: log-likelihoods from a hash, generations from a table."""

    name = "scripted"

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = 0

    @property
    def identity(self):
        return ModelIdentity("scripted", "scripted", "0" * 64, "float32", "1")

    def loglikelihood(self, requests, *, progress=None):
        self.calls += len(requests)
        out = []
        for r in requests:
            digest = hashlib.sha256((r.context + "|" + r.continuation).encode()).digest()
            out.append(LoglikelihoodResult(-digest[0] / 10.0, digest[1] % 2 == 0, 1))
        return out

    def loglikelihood_rolling(self, requests, *, progress=None):
        return [RollingResult(-float(len(r.text)), len(r.text.split())) for r in requests]

    def generate_until(self, requests, *, progress=None):
        self.calls += len(requests)
        return [GenerationResult(self.answers.get(r.context.rsplit("Question: ", 1)[-1], " no idea"), 3, "stop") for r in requests]

    def stream_chat(self, messages, params=None):
        yield "hi"


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    return shared_data


@pytest.fixture
def arithmetic(tmp_path):
    rows = [{"question": f"{a} + {a}?", "answer": f"Adding: {a}+{a}={2 * a}\n#### {2 * a}"} for a in range(1, 8)]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    (tmp_path / "arith.yaml").write_text(textwrap.dedent(f"""
        task: arith
        dataset_path: json
        dataset_kwargs:
          data_files:
            train: {tmp_path / 'train.jsonl'}
            test: {tmp_path / 'test.jsonl'}
        test_split: test
        fewshot_split: train
        num_fewshot: 2
        fewshot_config: {{sampler: first_n}}
        output_type: generate_until
        doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
        doc_to_target: "{{{{answer}}}}"
        generation_kwargs: {{until: ["Question:"], max_gen_toks: 32}}
        filter_list:
          - name: strict-match
            filter: [{{function: regex, regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"}}, {{function: take_first}}]
        metric_list:
          - metric: exact_match
            regexes_to_ignore: ["(?s).*#### "]
        metadata: {{version: 2}}
    """))
    answers = {"4 + 4?\nAnswer:": " 4+4=8\n#### 8", "5 + 5?\nAnswer:": " #### 11", "1 + 1?\nAnswer:": " #### 2"}
    return tmp_path, answers


def test_run_writes_results_with_protocol_and_samples(arithmetic, tmp_path):
    folder, answers = arithmetic
    index = TaskIndex([folder], bundled=False)
    tasks, groups = index.resolve(["arith"])
    run = evaluate(ScriptedBackend(answers), tasks, groups=groups, index=index, limit=5, seed=3)
    value = run.results["arith"]["exact_match,strict-match"]
    assert value.value == pytest.approx(2 / 5) and value.n == 5  # "1 + 1" and "4 + 4" right, "5 + 5" wrong
    # 2 of 5: the mid-p interval is lopsided about 0.4, so no standard error stands beside it
    assert value.interval == "mid-p" and value.stderr is None and value.ci_low < value.value < value.ci_high
    out = write_run(run, tmp_path / "out", log_samples=True)
    data = json.loads(out.read_text())
    protocol = data["protocol"]["arith"]
    assert protocol["first_prompt"].startswith("Question: 1 + 1?\nAnswer: Adding: 1+1=2\n#### 2\n\nQuestion: 2 + 2?")
    assert protocol["fewshot_doc_ids_first_doc"] == [0, 1]  # first_n from the train split, in order
    assert protocol["config_sha256"] == load_config_file(folder / "arith.yaml").sha256
    assert protocol["decoding"]["until"] == ["Question:"]
    assert data["model"]["backend"] == "scripted" and data["complete"] is True
    assert read_results(data)["arith"]["exact_match,strict-match"]["n"] == 5
    assert data["results"]["arith"]["exact_match,strict-match"] == pytest.approx(2 / 5)  # the harness's layout
    assert data["results"]["arith"]["exact_match_stderr,strict-match"] == "N/A"  # the harness's word for none
    samples = read_samples(tmp_path / "out" / "samples_arith.jsonl")
    assert [s["doc_id"] for s in samples] == [0, 1, 2, 3, 4]
    assert samples[3]["responses"] == [" 4+4=8\n#### 8"] and samples[3]["filtered"]["strict-match"] == ["8"]


def test_run_tasks_resolves_names_and_aggregates_groups(arithmetic, tmp_path):
    folder, answers = arithmetic
    (folder / "both.yaml").write_text("group: both\ntask: [arith]\naggregate_metric_list:\n"
                                      "  - {metric: exact_match, filter_list: strict-match, weight_by_size: true}\n")
    run = run_tasks(ScriptedBackend(answers), ["both"], include_paths=[folder], limit=5)
    assert run.results["both"]["exact_match,strict-match"].value == pytest.approx(2 / 5)


def test_rescore_with_a_changed_filter_needs_no_model(arithmetic, tmp_path):
    folder, answers = arithmetic
    index = TaskIndex([folder], bundled=False)
    run = evaluate(ScriptedBackend(answers), index.resolve(["arith"])[0], limit=5)
    write_run(run, tmp_path / "out", log_samples=True)
    changed = folder / "arith_lenient.yaml"
    changed.write_text((folder / "arith.yaml").read_text().replace("strict-match", "last-number").replace(
        'regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"', 'regex_pattern: "(-?[0-9]+)", group_select: -1'))  # fmt: skip
    records = read_samples(tmp_path / "out" / "samples_arith.jsonl")
    numbers = rescore(records, load_config_file(changed))
    assert numbers["exact_match,last-number"].value == pytest.approx(2 / 5)
    code = main(["rescore", str(tmp_path / "out" / "samples_arith.jsonl"), "--task", str(changed), "--output", str(tmp_path / "r.json")])
    assert code == 0
    assert read_results(json.loads((tmp_path / "r.json").read_text()))["arith"]["exact_match,last-number"]["n"] == 5


def test_rescore_with_a_task_of_another_kind_or_an_unwritable_output_is_one_line(arithmetic, tmp_path, capsys):
    folder, answers = arithmetic
    run = evaluate(ScriptedBackend(answers), TaskIndex([folder], bundled=False).resolve(["arith"])[0], limit=2)
    write_run(run, tmp_path / "out", log_samples=True)
    samples = str(tmp_path / "out" / "samples_arith.jsonl")
    assert main(["rescore", samples, "--task", "mmlu_anatomy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "record has no 'choices'; it was written by a task of another kind" in err
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["rescore", samples, "--task", str(folder / "arith.yaml"), "--samples-out", str(blocker / "s.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert main(["rescore", samples, "--task", str(folder / "arith.yaml"), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path.parent / f"{tmp_path.name}.partial").exists()  # the half-written file is gone


def test_request_cache_lets_a_second_run_skip_the_model(arithmetic, tmp_path):
    folder, answers = arithmetic
    tasks = TaskIndex([folder], bundled=False).resolve(["arith"])[0]
    first = CachedBackend(ScriptedBackend(answers), RequestCache(tmp_path / "cache.sqlite"))
    evaluate(first, tasks, limit=4)
    assert first.misses == 4 and first.hits == 0
    inner = ScriptedBackend(answers)
    second = CachedBackend(inner, RequestCache(tmp_path / "cache.sqlite"))
    again = evaluate(second, tasks, limit=6)
    assert second.hits == 4 and second.misses == 2 and inner.calls == 2
    assert again.results["arith"]["exact_match,strict-match"].n == 6


def test_multiple_choice_samples_have_one_logprob_per_choice(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"q": "sky?", "c": ["blue", "green", "red"], "a": 0}\n{"q": "grass?", "c": ["blue", "green", "red"], "a": 1}\n')
    (tmp_path / "mc.yaml").write_text(textwrap.dedent(f"""
        task: mc
        dataset_path: {tmp_path / 'd.jsonl'}
        test_split: train
        output_type: multiple_choice
        doc_to_text: "{{{{q}}}}"
        doc_to_choice: c
        doc_to_target: a
        metric_list: [{{metric: acc}}, {{metric: acc_norm}}, {{metric: acc_mutual_info}}, {{metric: brier_score}}]
    """))
    run = evaluate(ScriptedBackend(), TaskIndex([tmp_path], bundled=False).resolve(["mc"])[0])
    records = run.tasks["mc"].records
    assert all(len(r["choice_logprobs"]) == 3 and len(r["unconditional_logprobs"]) == 3 for r in records)
    assert set(run.results["mc"]) == {"acc", "acc_norm", "acc_mutual_info", "brier_score"}
    assert run.results["mc"]["brier_score"].higher_is_better is False


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["run", "--model", "hf", "--model-args", f"path={tmp_path}", "--tasks", "gsm8k", "--log-samples"]) == 2
    assert "--log-samples needs --output-dir" in capsys.readouterr().err
    assert main(["run", "--model", "nope", "--tasks", "gsm8k"]) == 2
    assert main(["run", "--model", "hf", "--model-args", f"path={tmp_path}", "--tasks", "not_a_task"]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main(["run", "--model", "hf", "--model-args", f"path={tmp_path}", "--tasks", "gsm8k", "--limit", "1"]) == 2
    assert "safetensors" in capsys.readouterr().err


def test_tasks_command_lists_bundled_tasks(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "mmlu\tgroup\t57 tasks" in out and "gsm8k\tgenerate_until" in out and "bbh\tgroup\t27 tasks" in out


class RecordingBackend(ScriptedBackend):
    """A scripted backend that keeps every generation request it receives."""

    def __init__(self, answers=None):
        super().__init__(answers)
        self.requests = []

    def generate_until(self, requests, *, progress=None):
        self.requests += list(requests)
        return super().generate_until(requests, progress=progress)


def _sent(request) -> dict:
    return {"until": list(request.until), "max_gen_toks": request.max_gen_toks, "do_sample": request.do_sample,
            "temperature": request.temperature, "top_p": request.top_p}  # fmt: skip


def test_protocol_names_every_decoding_setting_sent_and_where_it_came_from(arithmetic):
    folder, answers = arithmetic
    text = (folder / "arith.yaml").read_text()
    (folder / "bare.yaml").write_text(
        text.replace("task: arith", "task: bare")
        .replace('generation_kwargs: {until: ["Question:"], max_gen_toks: 32}', "generation_kwargs: {top_k: 40}")
    )
    index = TaskIndex([folder], bundled=False)
    cases = [
        ("arith", None, {"until": ["Question:"], "max_gen_toks": 32, "do_sample": False, "temperature": 0.0, "top_p": 1.0},
         {"until": "task", "max_gen_toks": "task", "do_sample": "default", "temperature": "default", "top_p": "default"}),
        ("bare", None, {"until": ["\n\n"], "max_gen_toks": 256, "do_sample": False, "temperature": 0.0, "top_p": 1.0},
         dict.fromkeys(["until", "max_gen_toks", "do_sample", "temperature", "top_p"], "default")),
        ("arith", "temperature=0.5,max_new_tokens=7", {"until": ["Question:"], "max_gen_toks": 7, "do_sample": True,
         "temperature": 0.5, "top_p": 1.0}, {"until": "task", "max_gen_toks": "cli", "do_sample": "cli",
         "temperature": "cli", "top_p": "default"}),
    ]  # fmt: skip
    for name, gen_kwargs, decoding, sources in cases:
        backend = RecordingBackend(answers)
        tasks, _ = index.resolve([name])
        protocol = evaluate(backend, tasks, limit=3, gen_kwargs=gen_kwargs).tasks[name].protocol
        assert protocol["decoding"] == decoding and protocol["decoding_sources"] == sources, (name, gen_kwargs)
        assert len(backend.requests) == 3 and all(_sent(r) == decoding for r in backend.requests)
        assert protocol["decoding_ignored"] == ({"top_k": 40} if name == "bare" else {})


def test_predict_only_stores_the_filtered_answers_a_scored_run_stores(data_env, tmp_path, capsys):
    index = TaskIndex()
    tasks, _ = index.resolve(["gsm8k"])
    first = evaluate(ScriptedBackend(), tasks, limit=6, num_fewshot=0)
    # right answers (strict and flexible) for even documents; for odd ones two numbers the filters split on
    answers = {
        r["prompt"].rsplit("Question: ", 1)[-1]: (
            f" So the answer is 3.\n#### {r['target'].split('#### ')[-1]}" if r["doc_id"] % 2 == 0
            else f" #### {r['doc_id']} and then 1{r['doc_id']}"
        )
        for r in first.tasks["gsm8k"].records
    }  # fmt: skip
    scored = evaluate(ScriptedBackend(answers), tasks, limit=6, num_fewshot=0)
    predicted = evaluate(ScriptedBackend(answers), tasks, limit=6, num_fewshot=0, predict_only=True)
    assert predicted.tasks["gsm8k"].metrics == {}
    write_run(scored, tmp_path / "scored", log_samples=True)
    write_run(predicted, tmp_path / "predicted", log_samples=True)
    kept = read_samples(tmp_path / "predicted" / "samples_gsm8k.jsonl")
    normal = read_samples(tmp_path / "scored" / "samples_gsm8k.jsonl")
    assert all("metrics" not in s for s in kept)
    assert [s["filtered"] for s in kept] == [s["filtered"] for s in normal]
    assert set(kept[1]["filtered"]) == {"strict-match", "flexible-extract"}
    assert kept[1]["filtered"]["strict-match"] != kept[1]["filtered"]["flexible-extract"]  # the filters differ
    assert main(["rescore", str(tmp_path / "predicted" / "samples_gsm8k.jsonl"), "--task", "gsm8k",
                 "--output", str(tmp_path / "rescored.json")]) == 0  # fmt: skip
    rescored = json.loads((tmp_path / "rescored.json").read_text())["intervals"]["gsm8k"]
    expected = scored.tasks["gsm8k"].metrics
    assert set(rescored) == set(expected) and expected["exact_match,strict-match"].value == pytest.approx(0.5)
    for key, value in expected.items():
        assert rescored[key]["value"] == pytest.approx(value.value, abs=1e-4) and rescored[key]["n"] == value.n == 6
