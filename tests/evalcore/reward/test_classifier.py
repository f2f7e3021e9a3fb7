"""``python -m evalcore reward`` with a sequence-classification reward model built on the real SmolLM2:
rewards equal a plain transformers forward pass, batching changes nothing, ties are exact and counted,
and every figure of report.json recomputes from rewards.jsonl (mid-p intervals against scipy's binomial)."""

from __future__ import annotations

import json

import pytest

from evalcore.cli import main
from evalcore.reward import classifier_rewards, read_reward_pairs
from evalcore.reward.classifier import SequenceClassifierReward
from tests.midp_reference import midp


@pytest.fixture(scope="module")
def run(reward_dir, pairs_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("reward-out")
    code = main(["reward", "--model", "hf", "--model-args", f"path={reward_dir},device=cpu,threads=1",
                 str(pairs_files["llmbar"]), f"mt-bench={pairs_files['mtbench']}", "--out", str(out)])  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    return json.loads((out / "report.json").read_text()), rows


def test_rewards_equal_a_direct_forward_pass(run, reward_dir, pairs_files):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(reward_dir, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        reward_dir, dtype=torch.float32, local_files_only=True
    ).eval()
    pairs, _ = read_reward_pairs([str(pairs_files["llmbar"]), f"mt-bench={pairs_files['mtbench']}"])
    _, rows = run
    assert [r["pair_id"] for r in rows] == [p.pair_id for p in pairs] and len(rows) == 12
    for pair, row in zip(pairs, rows):
        for answer, key in ((pair.chosen, "reward_chosen"), (pair.rejected, "reward_rejected")):
            messages = [{"role": "user", "content": pair.prompt}, {"role": "assistant", "content": answer}]
            text = tokenizer.apply_chat_template(messages, tokenize=False)
            with torch.inference_mode():
                direct = (
                    model(**tokenizer(text, add_special_tokens=False, return_tensors="pt"))
                    .logits[0, 0]
                    .item()
                )
            assert row[key] == pytest.approx(direct, abs=1e-4), (pair.pair_id, key)
    # the label picks the chosen answer: label 2 means output_2 is the chosen one
    raw = json.loads(pairs_files["llmbar"].read_text())
    assert [p.chosen for p in pairs[:8]] == [r[f"output_{r['label']}"] for r in raw]


def test_batched_equals_one_by_one(reward_dir, pairs_files):
    import torch

    torch.set_num_threads(1)
    model = SequenceClassifierReward(path=str(reward_dir), device="cpu", token_budget=2048)
    pairs, _ = read_reward_pairs([str(pairs_files["llmbar"]), str(pairs_files["mtbench"])])
    conversations = [(p.prompt, a) for p in pairs for a in (p.chosen, p.rejected)]
    calls = []
    forward = model._forward
    model._forward = lambda rows: calls.append(len(rows)) or forward(rows)
    batched = model.rewards(conversations)
    assert max(calls) > 1  # several conversations shared a forward pass
    model.batch_size, calls[:] = 1, []
    single = model.rewards(conversations)
    assert set(calls) == {1}
    assert batched == pytest.approx(single, abs=1e-4)
    # the same records through the public function
    records = classifier_rewards(model, pairs)
    assert [r.reward_chosen for r in records] == pytest.approx(single[0::2], abs=1e-4)


def test_report_recomputes_from_rewards(run):
    report, rows = run
    assert report["kind"] == "classifier" and report["model"]["backend"] == "hf"
    assert report["protocol"]["interval"] == "mid-p" and "tie" in report["protocol"]["tie_rule"]
    assert (
        len(report["protocol"]["chat_template_sha256"]) == 64
        and report["protocol"]["code_version"]["evalcore"]
    )
    assert [f["category"] for f in report["pairs_files"]] == ["llmbar", "mt-bench"]
    assert all(len(f["sha256"]) == 64 for f in report["pairs_files"])
    ties = [r for r in rows if r["outcome"] == "tie"]
    assert [r["pair_id"] for r in ties] == ["mt-bench/2", "mt-bench/3"]  # the two identical answers
    assert all(r["reward_chosen"] == r["reward_rejected"] for r in ties)
    for r in rows:
        expected = (
            "correct"
            if r["reward_chosen"] > r["reward_rejected"]
            else "tie"
            if r["reward_chosen"] == r["reward_rejected"]
            else "wrong"
        )
        assert r["outcome"] == expected and r["status"] == "ok"
    for name, subset in [("overall", rows), ("llmbar", rows[:8]), ("mt-bench", rows[8:])]:
        figure = report["overall"] if name == "overall" else report["categories"][name]
        correct = sum(r["outcome"] == "correct" for r in subset)
        assert figure["n"] == len(subset) and figure["correct"] == correct
        assert figure["tie"] == sum(r["outcome"] == "tie" for r in subset)
        assert figure["wrong"] == len(subset) - correct - figure["tie"]
        assert figure["value"] == pytest.approx(correct / len(subset), abs=1e-12)
        assert (figure["ci_low"], figure["ci_high"]) == pytest.approx(midp(correct, len(subset)), abs=1e-4)
        assert figure["interval"] == "mid-p"
    assert report["categories"]["mt-bench"]["tie"] == 2 and report["skipped_pairs"] == []


def test_too_long_pairs_are_skipped_not_truncated(reward_dir, pairs_files, tmp_path):
    out = tmp_path / "out"
    code = main(["reward", "--model", "hf", "--model-args", f"path={reward_dir},device=cpu,max_length=60",
                 str(pairs_files["mtbench"]), "--out", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    skipped = [r["pair_id"] for r in rows if r["status"] == "skipped"]
    assert skipped and report["skipped_pairs"] == skipped and report["overall"]["skipped"] == len(skipped)
    assert report["overall"]["n"] == len(rows) - len(skipped)


def test_the_site_importer_accepts_the_run_and_refuses_a_changed_reward(run):
    from evalcore.reward.stored import verify_report

    report, rows = run
    checked = verify_report(report, rows)
    assert checked["overall"] == report["overall"] and len(checked["pairs_key"]) == 64
    changed = [dict(r) for r in rows]
    correct = next(r for r in changed if r["outcome"] == "correct")
    correct["reward_chosen"] = correct["reward_rejected"] - 1  # now wrong, but still labelled correct
    with pytest.raises(ValueError, match="does not follow from its rewards"):
        verify_report(report, changed)
    correct["outcome"] = "wrong"
    with pytest.raises(ValueError, match="overall value .* does not match"):
        verify_report(report, changed)
