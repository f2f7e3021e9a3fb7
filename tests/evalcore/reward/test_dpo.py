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


def _answer_ids(tokenizer, prompt: str, answer: str) -> tuple[list[int], list[int]]:
    """The rendered prompt's ids (chat template, generation prompt) and the answer's ids after them, read
    from the whole conversation's ids (which, for these texts, begin with the prompt's ids)."""
    user = [{"role": "user", "content": prompt}]
    context = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": answer}], tokenize=False)
    assert full.startswith(context)
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    assert ids[: len(context_ids)] == context_ids
    return context_ids, ids[len(context_ids) :]


def _logprob(model, tokenizer, prompt: str, answer: str) -> float:
    """Sum of log p(token | everything before it) over the answer's tokens only (its end of turn included,
    not the newline that ends the prompt's ``<|im_start|>assistant``), from one plain forward pass."""
    import torch

    context_ids, answer_ids = _answer_ids(tokenizer, prompt, answer)
    ids = context_ids + answer_ids
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    return float(sum(logprobs[i - 1, ids[i]] for i in range(len(context_ids), len(ids))))


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


def test_only_the_answers_tokens_are_scored(smollm2_dir):
    """The prompt ends with the newline after ``<|im_start|>assistant``: that token is the prompt's. The
    old split (the harness's trailing-whitespace rule) scored it as the answer's first token."""
    import torch
    from transformers import AutoModelForCausalLM

    from evalcore.reward import dpo_tokens
    from evalcore.reward.pairs import RewardPair
    from evalcore.reward.scoring import dpo_rewards
    from tests.evalcore.models._shared import smollm2_backend

    backend = smollm2_backend(str(smollm2_dir))
    tokenizer = backend.tokenizer
    newline = tokenizer.encode("\n", add_special_tokens=False)
    prompt, answer = "Name a colour.", "Blue is a colour."
    context_ids, answer_ids = dpo_tokens(backend, prompt, answer)
    assert (context_ids, answer_ids) == tuple(_answer_ids(tokenizer, prompt, answer))
    assert context_ids[-1:] == newline and answer_ids[0] not in newline
    assert tokenizer.decode(answer_ids) == answer + "<|im_end|>\n"

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32, local_files_only=True).eval()
    direct = _logprob(model, tokenizer, prompt, answer)
    with torch.inference_mode():
        last = torch.log_softmax(model(torch.tensor([context_ids])).logits[0, -2].float(), dim=-1)
    with_newline = direct + float(last[context_ids[-1]])
    assert abs(with_newline - direct) > 1e-4  # the old sum is told apart at this tolerance
    pair = RewardPair(pair_id="t/0", category="t", prompt=prompt, chosen=answer, rejected="Red.", label=1)
    (record,) = dpo_rewards(backend, backend, [pair], beta=BETA)
    assert record.logprobs["policy_chosen"] == pytest.approx(direct, abs=1e-4)


def test_a_token_merged_across_the_boundary_stays_the_prompts(smollm2_dir):
    """An answer that begins with two spaces: ``assistant\\n`` + ``  Blue.`` encodes ``\\n `` as one token in
    the whole conversation; the prompt keeps its own ids and every scored token is the answer's."""
    from evalcore.reward import dpo_tokens
    from tests.evalcore.models._shared import smollm2_backend

    backend = smollm2_backend(str(smollm2_dir))
    tokenizer = backend.tokenizer
    prompt, answer = "Name a colour.", "  Blue."
    user = [{"role": "user", "content": prompt}]
    context = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*user, {"role": "assistant", "content": answer}], tokenize=False)
    whole = tokenizer(full, add_special_tokens=False)["input_ids"]
    prompt_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    assert whole[: len(prompt_ids)] != prompt_ids  # the merge this test is about
    context_ids, answer_ids = dpo_tokens(backend, prompt, answer)
    assert context_ids == prompt_ids
    assert tokenizer.decode(answer_ids) == full[len(context) :]
    assert answer_ids == tokenizer(full[len(context) :], add_special_tokens=False)["input_ids"]
