"""``python -m evalcore judge audit``: every figure of report.json recomputes from judgments.jsonl; bad input
and an unresponsive judge endpoint give one clear error naming the item."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
import yaml

from evalcore.cli import main
from tests.midp_reference import clustered_effective, midp, midp_effective


def clustered_midp(hits, clusters) -> tuple[tuple[float, float], str]:
    """Mid-p bounds of a clustered 0/1 rate at its effective size (:func:`tests.midp_reference.clustered_effective`:
    n over the CR1 design effect (Cameron & Miller 2015), then over (t_{G-1} / z)^2)."""
    effective = clustered_effective(hits, clusters)
    return midp_effective(float(np.mean(hits)) * effective, effective), "mid-p-effective"


def kappa(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    po = np.mean(a == b)
    pe = sum(np.mean(a == c) * np.mean(b == c) for c in (0, 1, 2))
    return 0.0 if pe >= 1 else (po - pe) / (1 - pe)


def winner(score: float) -> int:
    return 1 if score > 0.5 else 2 if score < 0.5 else 0


def judge_args(smollm2_dir):
    return ["--model", "hf", "--model-args", f"path={smollm2_dir},dtype=float32,device=cpu"]


@pytest.fixture(scope="module")
def audit(tmp_path_factory, smollm2_dir, llmbar):
    out = tmp_path_factory.mktemp("audit")
    code = main(["judge", "audit", str(llmbar), *judge_args(smollm2_dir), "--protocol", "alpacaeval-logprob",
                 "--out", str(out), "--limit", "6", "--rounds", "300", "--seed", "7", "--verbosity", "2",
                 "--self-preference", "1", "--max-new-tokens", "16"])
    assert code == 0
    return out


def test_report_recomputes_from_judgments(audit, llmbar):
    labels = [p["label"] for p in json.loads(llmbar.read_text())[:6]]
    rows = [json.loads(line) for line in (audit / "judgments.jsonl").read_text().splitlines()]
    assert [(r["pair_id"], r["order"]) for r in rows] == [(i, o) for i in range(6) for o in ("ab", "ba")]
    assert all(r["status"] == "ok" and len(r["prompt_sha256"]) == 64 for r in rows)
    s_ab = np.array([r["p_first"] for r in rows[::2]])
    s_ba = 1 - np.array([r["p_first"] for r in rows[1::2]])  # P(output_1 better) in the ba order
    w_ab, w_ba = [winner(s) for s in s_ab], [winner(s) for s in s_ba]
    w_swap = [winner(s) for s in (s_ab + s_ba) / 2]
    w_agree = [a if a == b else 0 for a, b in zip(w_ab, w_ba)]
    report = json.loads((audit / "report.json").read_text())
    expected = {
        "accuracy_ab": [w == y for w, y in zip(w_ab, labels)],
        "accuracy_ba": [w == y for w, y in zip(w_ba, labels)],
        "accuracy_swap_average": [w == y for w, y in zip(w_swap, labels)],
        "accuracy_both_agree": [w == y for w, y in zip(w_agree, labels)],
        "consistency": [a == b for a, b in zip(w_ab, w_ba)],
        "first_position_rate": [r["p_first"] > 0.5 for r in rows],
    }
    for key, hits in expected.items():
        figure = report[key]
        assert figure["n"] == len(hits) and figure["value"] == pytest.approx(np.mean(hits), abs=1e-12), key
        if key == "first_position_rate":  # two judgments per pair: the pair is a cluster
            bounds, method = clustered_midp(hits, [r["pair_id"] for r in rows])
        else:
            bounds, method = midp(sum(hits), len(hits)), "mid-p"
        assert (figure["ci_low"], figure["ci_high"]) == pytest.approx(bounds, abs=1e-4), key
        assert figure["interval"] == method, key
    k = report["kappa"]
    assert k["value"] == pytest.approx(kappa(w_swap, labels), abs=1e-12)
    draws = np.random.default_rng(k["seed"]).integers(0, 6, size=(k["rounds"], 6))
    samples = [kappa(np.array(w_swap)[d], np.array(labels)[d]) for d in draws]
    assert (k["ci_low"], k["ci_high"]) == pytest.approx(tuple(np.quantile(samples, [0.025, 0.975])), abs=1e-12)
    assert report["failed_pairs"] == [] and report["pairs"] == 6


def test_verbosity_and_self_preference_sections(audit):
    report = json.loads((audit / "report.json").read_text())
    rows = [json.loads(line) for line in (audit / "verbosity_judgments.jsonl").read_text().splitlines()]
    swap = [0.5 + (a["p_first"] - b["p_first"]) / 2 for a, b in zip(rows[::2], rows[1::2])]
    share = report["verbosity"]["prefers_padded"]["share"]
    assert share["n"] == 2 and share["value"] == np.mean([s < 0.5 for s in swap])  # answer_2 is the padded copy
    assert report["self_preference"]["prefers_own"]["share"]["n"] == 1
    assert len((audit / "self_preference_judgments.jsonl").read_text().splitlines()) == 2


def test_rerun_is_served_from_the_cache(audit, smollm2_dir, llmbar):
    before = (audit / "report.json").read_text()
    assert main(["judge", "audit", str(llmbar), *judge_args(smollm2_dir), "--protocol", "alpacaeval-logprob",
                 "--out", str(audit), "--limit", "6", "--rounds", "300", "--seed", "7", "--verbosity", "2",
                 "--self-preference", "1", "--max-new-tokens", "16"]) == 0
    rows = [json.loads(line) for line in (audit / "judgments.jsonl").read_text().splitlines()]
    assert all(r["cached"] for r in rows)
    assert json.loads((audit / "report.json").read_text()) == json.loads(before)


def test_bad_pairs_file_is_one_error_naming_the_pair(tmp_path, smollm2_dir, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"input": "q", "output_1": "a", "output_2": "b", "label": 1}\n'
                     '{"input": "q", "output_1": "a", "output_2": "b", "label": 0}\n')
    code = main(["judge", "audit", str(pairs), *judge_args(smollm2_dir), "--protocol", "alpacaeval-logprob",
                 "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: pair 1 (line 2): label 0 is not 1 or 2"


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        (["--verbosity", "2"], None, "error: --verbosity needs GSM8K's test.jsonl: pass --gsm8k FILE or export PODIUM_DATA_DIR=DIR"),
        (["--verbosity", "2", "--gsm8k", "{tmp}/none.jsonl"], None, "error: --verbosity: GSM8K file '{tmp}/none.jsonl' does not exist"),
        (["--verbosity", "2"], "{tmp}", "error: --verbosity: GSM8K file '{tmp}/benchmarks/gsm8k/test.jsonl' does not exist"),
        (["--verbosity", "-1"], None, "error: --verbosity must be at least 0"),
        (["--self-preference", "-2"], None, "error: --self-preference must be at least 0"),
    ],
    ids=["no-data-dir", "missing-file", "missing-under-data-dir", "negative-verbosity", "negative-self-preference"],
)
def test_bad_audit_extras_stop_before_the_judge_loads(tmp_path, llmbar, monkeypatch, capsys, extra, env, message):
    monkeypatch.delenv("PODIUM_DATA_DIR", raising=False)
    if env:
        monkeypatch.setenv("PODIUM_DATA_DIR", env.format(tmp=tmp_path))
    # No model at this path: reaching the judge would be a different error, so the check came first.
    code = main(["judge", "audit", str(llmbar), "--model", "hf", "--model-args", f"path={tmp_path}/no-model",
                 "--protocol", "alpacaeval-logprob", "--out", str(tmp_path / "out"),
                 *[a.format(tmp=tmp_path) for a in extra]])
    assert code == 2
    assert capsys.readouterr().err.strip().startswith(message.format(tmp=tmp_path))
    assert not (tmp_path / "out").exists()


def test_template_missing_a_placeholder_is_refused(tmp_path, smollm2_dir, llmbar, capsys):
    protocol = tmp_path / "p.yaml"
    protocol.write_text(yaml.safe_dump({"name": "p", "kind": "pairwise", "user": "{question} {answer_a}",
                                        "verdict": {"method": "logprob", "tokens": {"A": "A", "B": "B"}}}))
    code = main(["judge", "audit", str(llmbar), *judge_args(smollm2_dir), "--protocol", str(protocol),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    assert "missing the placeholder {answer_b}" in capsys.readouterr().err


def test_an_unparseable_generated_verdict_is_failed_not_a_tie(tmp_path, smollm2_dir, llmbar):
    protocol = tmp_path / "gen.yaml"
    protocol.write_text(yaml.safe_dump({
        "name": "g", "kind": "pairwise", "user": "{question}\nA: {answer_a}\nB: {answer_b}\nAnswer [[A]] or [[B]].",
        "verdict": {"method": "generate", "max_new_tokens": 6,
                    "outcomes": [{"pattern": "[[A]]", "winner": "A"}, {"pattern": "[[B]]", "winner": "B"}]},
    }))  # fmt: skip
    out = tmp_path / "out"
    code = main(["judge", "audit", str(llmbar), *judge_args(smollm2_dir), "--protocol", str(protocol),
                 "--out", str(out), "--limit", "1"])
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    for row in rows:
        found = [p for p in ("[[A]]", "[[B]]") if p in row["raw"]]
        assert row["status"] == ("ok" if len(found) == 1 else "failed")
        assert ("winner" in row) == (row["status"] == "ok")
    report = json.loads((out / "report.json").read_text())
    assert report["failed_judgments"] == sum(r["status"] == "failed" for r in rows)
    assert code == (1 if report["failed_judgments"] else 0)
    assert report["ties_swap_average"] <= report["accuracy_ab"]["n"]


def test_an_endpoint_that_never_answers_fails_each_judgment_by_name(tmp_path, llmbar, capsys):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections are accepted by the kernel; nothing is ever read or answered
    port = silent.getsockname()[1]
    out = tmp_path / "out"
    try:
        code = main(["judge", "audit", str(llmbar), "--model", "openai", "--model-args",
                     f"base_url=http://127.0.0.1:{port}/v1,model=judge,timeout=1,max_retries=0",
                     "--protocol", "mt-bench-pairwise", "--out", str(out), "--limit", "1"])
    finally:
        silent.close()
    assert code == 1
    err = capsys.readouterr().err
    assert "2 of 2 judgments failed" in err and "pair 0, order ab" in err and "no answer within 1 s" in err
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert [(r["status"], "winner" in r) for r in rows] == [("failed", False), ("failed", False)]
    report = json.loads((out / "report.json").read_text())
    assert report["failed_pairs"] == ["0"] and report["accuracy_swap_average"]["n"] == 0
