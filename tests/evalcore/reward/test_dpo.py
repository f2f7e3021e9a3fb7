"""DPO implicit rewards through ``python -m evalcore reward --ref-model-args``: a policy against itself
gives every reward 0 (every pair a tie, accuracy 0), and SmolLM2 with perturbed weights against SmolLM2
gives beta * (log p_policy - log p_ref), each log-probability equal to a direct transformers forward pass."""

from __future__ import annotations

import json

import pytest

from evalcore.cli import main
from evalcore.reward import read_reward_pairs

BETA = 0.5


def _run(out, policy, reference, pairs_files, *extra):
    code = main(["reward", "--model", "hf", "--model-args", f"path={policy},device=cpu,threads=1",
                 "--ref-model-args", f"path={reference},device=cpu,threads=1", "--beta", str(BETA),
                 str(pairs_files["llmbar"]), str(pairs_files["mtbench"]), "--out", str(out), *extra])  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    return json.loads((out / "report.json").read_text()), rows


def test_policy_against_itself_ties_every_pair(smollm2_dir, pairs_files, tmp_path):
    report, rows = _run(tmp_path, smollm2_dir, smollm2_dir, pairs_files)
    assert len(rows) == 12
    assert all(
        r["reward_chosen"] == 0.0 and r["reward_rejected"] == 0.0 and r["outcome"] == "tie" for r in rows
    )
    overall = report["overall"]
    assert (overall["n"], overall["tie"], overall["correct"], overall["value"], overall["ci_low"]) == (
        12,
        12,
        0,
        0.0,
        0.0,
    )
    assert report["kind"] == "dpo" and report["protocol"]["beta"] == BETA
    assert report["model"]["weights_sha256"] == report["reference"]["weights_sha256"]


def _logprob(model, tokenizer, prompt: str, answer: str) -> float:
    """log p(answer and its end of turn | prompt as a user turn), from one plain forward pass."""
    import torch

    user = [{"role": "user", "content": prompt}]
    context = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": answer}], tokenize=False)
    assert full.startswith(context)
    stripped = context.rstrip()  # the harness moves the context's trailing whitespace to the continuation
    ids = tokenizer(stripped + full[len(stripped) :], add_special_tokens=False)["input_ids"]
    start = len(tokenizer(stripped, add_special_tokens=False)["input_ids"])
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    return float(sum(logprobs[i - 1, ids[i]] for i in range(start, len(ids))))


def test_perturbed_policy_against_smollm2(smollm2_dir, perturbed_dir, pairs_files, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report, rows = _run(tmp_path, perturbed_dir, smollm2_dir, pairs_files)
    assert report["model"]["weights_sha256"] != report["reference"]["weights_sha256"]
    for r in rows:
        lp = r["logprobs"]
        assert r["reward_chosen"] == pytest.approx(
            BETA * (lp["policy_chosen"] - lp["reference_chosen"]), abs=1e-9
        )
        assert r["reward_rejected"] == pytest.approx(
            BETA * (lp["policy_rejected"] - lp["reference_rejected"]), abs=1e-9
        )
    different = [r for r in rows if r["reward_chosen"] != r["reward_rejected"]]
    assert len(different) == 10  # all but the two pairs of identical answers
    assert [r["pair_id"] for r in rows if r["outcome"] == "tie"] == ["mtbench/2", "mtbench/3"]
    assert report["overall"]["correct"] == sum(r["outcome"] == "correct" for r in rows)

    pairs, _ = read_reward_pairs([str(pairs_files["llmbar"]), str(pairs_files["mtbench"])])
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir, local_files_only=True)
    for path, role in ((perturbed_dir, "policy"), (smollm2_dir, "reference")):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True).eval()
        for pair, row in list(zip(pairs, rows))[:3]:
            for answer, side in ((pair.chosen, "chosen"), (pair.rejected, "rejected")):
                direct = _logprob(model, tokenizer, pair.prompt, answer)
                assert row["logprobs"][f"{role}_{side}"] == pytest.approx(direct, abs=1e-4), (
                    pair.pair_id,
                    role,
                    side,
                )
