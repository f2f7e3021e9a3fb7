"""``python -m evalcore contamination scan`` end to end, and its errors (one line, exit code 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evalcore.cli import main
from tests.conftest import REPO_ROOT


def test_scan_command_writes_flagged_items_and_report(data_env, gsm8k_items, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": gsm8k_items[i].text}) + "\n" for i in (2, 9)) + "\xff broken\n")
    out = tmp_path / "out"
    assert main(["contamination", "scan", "--tasks", "gsm8k", "--corpus", str(corpus), "--n", "8", "--out", str(out)]) == 0
    flagged = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert [(f["task"], f["doc_id"], f["share"]) for f in flagged] == [("gsm8k", 2, 1.0), ("gsm8k", 9, 1.0)]
    report = json.loads((out / "report.json").read_text())
    assert report["n"] == 8
    assert report["tasks"]["gsm8k"] == {"items": 1319, "flagged": 2, "share": round(2 / 1319, 6), "too_short": 0}
    assert report["corpus"]["skipped"] == {"bad_json": 1}
    assert "gsm8k\titems 1319\tflagged 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "gsm8k_nonexistent"], "unknown task 'gsm8k_nonexistent'"),
        (["--tasks", "gsm8k", "--n", "20"], "n must be an integer from 8 to 13"),
        (["--tasks", "gsm8k", "--min-matches", "0"], "--min-matches must be at least 1, got 0"),
        (["--tasks", "gsm8k", "--max-line-bytes", "0"], "--max-line-bytes must be at least 1, got 0"),
        (["--tasks", ","], "--tasks names no task"),
    ],
)
def test_scan_errors_are_one_line_and_exit_code_2(data_env, tmp_path, args, message):
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text\n")
    command = [sys.executable, "-m", "evalcore", "contamination", "scan", "--corpus", str(corpus), "--out", str(tmp_path / "o"), *args]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and message in done.stderr


def test_missing_corpus_and_wrong_suffix_are_clear_errors(data_env, tmp_path, capsys):
    assert main(["contamination", "scan", "--tasks", "gsm8k", "--corpus", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert "corpus path" in capsys.readouterr().err
    (tmp_path / "weights.bin").write_bytes(b"\x00\x01")
    assert main(["contamination", "scan", "--tasks", "gsm8k", "--corpus", str(tmp_path / "weights.bin"), "--out", str(tmp_path)]) == 2
    assert "is not one of .txt, .jsonl" in capsys.readouterr().err


def test_probe_and_exchangeability_commands_write_their_results(data_env, tiny_dir, tmp_path):
    """Plumbing on a tiny random model: files written, numbers consistent."""
    model = ["--model", "hf", "--model-args", f"path={tiny_dir},dtype=float32,device=cpu"]
    out = tmp_path / "probe"
    assert main(["contamination", "probe", *model, "--tasks", "gsm8k", "--limit", "2", "--out", str(out)]) == 0
    summary = json.loads((out / "probe.json").read_text())["tasks"]["gsm8k"]
    assert summary["test"]["n"] == summary["train"]["n"] == 2
    assert summary["difference"] == summary["test"]["rate"] - summary["train"]["rate"]
    assert summary["test"]["interval"] == "mid-p" and summary["diff_interval"] == "newcombe-mid-p"
    assert summary["test"]["ci_high"] > summary["test"]["rate"] or summary["test"]["rate"] == 1.0  # never a point
    records = [json.loads(line) for line in (out / "probe_samples.jsonl").read_text().splitlines()]
    assert [r["split"] for r in records] == ["test", "test", "train", "train"]

    out = tmp_path / "exch"
    args = ["--tasks", "gsm8k", "--shard-size", "3", "--permutations", "4", "--out", str(out)]
    assert main(["contamination", "exchangeability", *model, *args]) == 0
    result = json.loads((out / "exchangeability.json").read_text())
    assert result["documents"] == 3 and len(result["permuted_logprobs"]) == 4
    expected = (1 + sum(p >= result["canonical_logprob"] for p in result["permuted_logprobs"])) / 5
    assert result["p_value"] == expected
    assert main(["contamination", "exchangeability", *model, "--tasks", "gsm8k,mmlu", "--out", str(out)]) == 2
