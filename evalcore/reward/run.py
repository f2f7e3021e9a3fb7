"""One reward run from pairs files to report: what ``python -m evalcore reward`` and the site's worker both call.

:func:`reward_run` reads the pairs, loads the model (a sequence classifier, or a DPO policy and its
reference), scores every pair and returns the report (``report.json``'s content) and the per-pair
records (``rewards.jsonl``'s lines). :func:`reward_files_write` writes the two files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from evalcore.engine.results import code_version
from evalcore.models import load_backend, loading_lock
from evalcore.reward.classifier import SequenceClassifierReward
from evalcore.reward.pairs import MAX_FIELD_CHARS, read_reward_pairs
from evalcore.reward.scoring import PairReward, classifier_rewards, dpo_rewards, reward_report

DEFAULT_BETA = 0.1
TIE_RULE = "a pair is correct when the chosen answer's reward is strictly higher; equal rewards are a tie, never correct"


def _template_sha256(model) -> str | None:
    """SHA-256 of the chat template that shapes the conversations (None without one)."""
    template = getattr(getattr(model, "tokenizer", None), "chat_template", None)
    return hashlib.sha256(template.encode()).hexdigest() if isinstance(template, str) else None


def reward_run(
    pairs_specs: Sequence[str], *, model: str, model_args: dict, ref_model: str | None = None,
    ref_model_args: dict | None = None, beta: float = DEFAULT_BETA, limit: int | None = None,
    max_field_chars: int = MAX_FIELD_CHARS, progress: Callable[[int], None] | None = None,
) -> tuple[dict, list[PairReward]]:  # fmt: skip
    """Score a reward model on ``pairs_specs`` (``[NAME=]PATH``, one category each).

    Without ``ref_model_args`` the model is a sequence-classification reward model (``model`` must be
    ``hf``); with them, a DPO policy scored against that reference (``ref_model`` defaults to ``model``;
    the same backend and arguments share one loaded model). ``limit`` keeps the first N pairs of each
    file; ``progress(n)`` is called as conversations are scored. Returns (report, records). ValueError
    for bad pairs or options, before any model loads.
    """
    dpo = ref_model_args is not None
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if not dpo and model != "hf":
        raise ValueError(f"a sequence-classification reward model runs on the hf backend, not {model!r}")
    pairs, files = read_reward_pairs(pairs_specs, max_field_chars=max_field_chars)
    if limit is not None:  # the first N of each file (pair ids end with the index in the file)
        pairs = [p for p in pairs if int(p.pair_id.rsplit("/", 1)[1]) < limit]
    protocol = {"tie_rule": TIE_RULE, "interval": "mid-p", "level": 0.95, "limit": limit,
                "max_field_chars": max_field_chars, "code_version": code_version()}  # fmt: skip
    if dpo:
        policy = load_backend(model, **model_args)
        ref_name = ref_model or model
        reference = policy if (ref_name == model and ref_model_args == model_args) else load_backend(ref_name, **ref_model_args)
        try:
            records = dpo_rewards(policy, reference, pairs, beta=beta, progress=progress)
            report = {"kind": "dpo", "model": policy.identity.as_dict(), "reference": reference.identity.as_dict()}
        finally:
            for backend in {id(policy): policy, id(reference): reference}.values():
                getattr(backend, "close", lambda: None)()
        protocol.update(beta=beta, reward="beta * (log p_policy(answer|prompt) - log p_reference(answer|prompt))",
                        conversation="prompt as a user turn (chat template); the answer's tokens to the end of its turn")  # fmt: skip
    else:
        with loading_lock:  # built as load_backend builds: one model at a time in a process
            classifier = SequenceClassifierReward(**model_args)
        try:
            records = classifier_rewards(classifier, pairs, progress=progress)
            report = {"kind": "classifier", "model": classifier.identity.as_dict()}
            protocol.update(chat_template_sha256=_template_sha256(classifier))
        finally:
            classifier.close()
        protocol.update(reward="the score head's output at the conversation's last token",
                        conversation="prompt as a user turn, answer as the assistant's, chat template (plain text without one)",
                        max_length=classifier.max_length)  # fmt: skip
    report["protocol"] = protocol
    report.update(reward_report(records, files))
    return report, records


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def reward_files_write(out: str | os.PathLike, report: dict, records: Sequence[PairReward]) -> None:
    """``out/rewards.jsonl`` (one line per pair) and ``out/report.json``, each replaced atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "rewards.jsonl",
           "".join(json.dumps(r.as_dict(), ensure_ascii=False, sort_keys=True) + "\n" for r in records))  # fmt: skip
    _write(out / "report.json", json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
