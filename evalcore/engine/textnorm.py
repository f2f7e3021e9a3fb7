"""DROP / SQuAD-style answer normalisation and bag-of-words F1.

Tokens are split on any whitespace and hyphens (not just spaces), and punctuation touching a
number is stripped before the number is parsed. The public DROP leaderboard split on spaces
only, so a completion like ``"10\\n\\npassage..."`` became one token ``"10\\n\\npassage"``, was not
recognised as the number 10, and scored 0 against the gold ``"10"``; here it matches.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_SPLIT = re.compile(r"[\s\-]+")
_PUNCT = set(string.punctuation)


def _number(token: str) -> float | None:
    stripped = token.strip(string.punctuation.replace("-", "").replace(".", "") + ".")
    stripped = stripped.replace(",", "")
    if not stripped or not any(ch.isdigit() for ch in stripped):
        return None
    try:
        return float(stripped)
    except ValueError:
        return None


def normalize_token(token: str) -> str:
    number = _number(token)
    if number is not None:
        return str(number)
    token = "".join(ch for ch in token.lower() if ch not in _PUNCT)
    token = _ARTICLES.sub(" ", token)
    return " ".join(token.split())


def answer_tokens(text: str) -> list[str]:
    """Normalised tokens: lower case, no punctuation or articles, numbers as floats."""
    tokens = []
    for raw in _SPLIT.split(str(text)):
        token = normalize_token(raw)
        if token:
            tokens.extend(token.split())
    return tokens


def _numbers(tokens: list[str]) -> set[str]:
    found = set()
    for token in tokens:
        try:
            float(token)
            found.add(token)
        except ValueError:
            pass
    return found


def f1_score(prediction: str, gold: str) -> float:
    """Bag-of-words F1 between normalised answers; 0 when the gold has numbers none of which appear."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    gold_numbers = _numbers(ref)
    if gold_numbers and not gold_numbers & _numbers(pred):
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def max_f1(prediction: str, golds) -> float:
    """Best F1 over several acceptable gold answers."""
    golds = golds if isinstance(golds, list | tuple) else [golds]
    return max(f1_score(prediction, g) for g in golds)
