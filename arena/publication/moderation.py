"""The moderation step: tags battles whose prompts should not be published without a human look.

The tagger is ``alt-profanity-check`` (PyPI), a linear SVM over TF-IDF features trained on offensive
and profane language, whose model ships inside the package: it runs offline, in microseconds. It
recognises abusive and obscene language; it does **not** know dangerous requests phrased politely
("how to make a bomb" scores 0.05), nor sexual content involving minors, self-harm and the other
categories a moderation model covers (docs/privacy.md says so). A battle's score is its highest
prompt's probability; at or above ``ARENA_MODERATION_THRESHOLD`` it is tagged, held back from
publication and put in the review queue. Voters' reports (arena.publication.holds) hold a battle
whatever its score.
"""

from __future__ import annotations

import functools
import importlib.metadata

from django.conf import settings

CODE_VERSION = "1"


def _package_version() -> str:
    try:
        return importlib.metadata.version("alt-profanity-check")
    except importlib.metadata.PackageNotFoundError:
        return "missing"


MODERATION_VERSION = f"podium-moderation-{CODE_VERSION}+alt-profanity-check-{_package_version()}"


@functools.lru_cache(maxsize=1)
def _predict():
    from profanity_check import predict_prob  # noqa: PLC0415 - loads scikit-learn and the model (~2 s)

    return predict_prob


def prompt_scores(prompts: list[str]) -> list[float]:
    """The tagger's probability that each prompt is offensive (0 for an empty one)."""
    texts = [str(p or "")[:20_000] for p in prompts]
    if not texts:
        return []
    return [float(x) if t.strip() else 0.0 for x, t in zip(_predict()(texts), texts, strict=True)]


def verdict(prompts: list[str]) -> dict:
    """``{"version", "score", "flagged"}`` for a battle with these prompts."""
    score = max(prompt_scores(prompts), default=0.0)
    return {"version": MODERATION_VERSION, "score": round(score, 4), "flagged": score >= settings.ARENA_MODERATION_THRESHOLD}
