"""Does an answer give away which model wrote it? The identity filter behind ``identity_revealed`` votes.

A vote on answers that name a model (its catalogue name, a declared alias, its family or its maker)
cannot be blind, so it is kept but not rated. Two kinds of match, both insensitive to case and to
spaces, hyphens, dots and underscores between the parts of a term ("GPT-4o mini", "gpt4o-mini" and
"GPT 4o Mini" all match ``gpt-4o-mini``; "Hugging Face" matches ``HuggingFace``):

* **A term anywhere**, as whole words: not inside a longer word or a hyphenated compound, so a maker
  called "Meta" matches "Meta's model" but not "metadata" or "meta-analysis", and a family "llama"
  does not match "llamas". Terms shorter than :data:`MIN_TERM` characters are ignored.
* **Self-identification**: "I am X", "I'm X", "my name is X", "call me X", "as X, ...", "created /
  developed / trained / built / made by X", where X is the first part or parts of a term ("I am SmolLM2"
  or "I'm Smol" for the model ``SmolLM2-135M-Instruct``, "I am Qwen" for ``qwen2.5-7b``). X must have
  at least :data:`MIN_TERM` letters or digits and not be one of a few common words ("I am sorry",
  "as well, ...").

Parts of a term: runs of letters or of digits, split at separators and at lower-to-upper case changes
("SmolLM2" is Smol, LM, 2; "qwen2.5" is qwen, 2, 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MIN_TERM = 3
_SEP = r"[\s._\-]{0,3}"
_BEFORE = r"(?<![\w-])"
_AFTER = r"(?!\w|-\w)"
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_]+")

_SELF = re.compile(
    r"(?:\bI\s+am|\bI['\u2019]m|\bmy\s+name\s+is|\bcall\s+me|\b(?:created|developed|trained|built|made)\s+by)"
    r"\s+(?:an?\s+|the\s+)?([^\W_][\w.\-]*(?:\s+[^\W_][\w.\-]*)?)"
    r"|\bas\s+(?:an?\s+|the\s+)?([^\W_][\w.\-]*(?:\s+[^\W_][\w.\-]*)?)\s*,",
    re.IGNORECASE,
)
COMMON_WORDS = frozenset(
    "able about afraid also always an and any are my available back but can cannot certain close conscious "
    "currently designed doing done excited familiar forever frankly glad going good great happy here "
    "honest however human just language large like more much not now often only open really result "
    "ready programmed simply so sorry still such sure that the then there this trained trying unable "
    "unsure very well what when which why yes you your".split()
)


def _parts(term: str) -> list[str]:
    return [p.lower() for p in _PARTS.findall(term)]


def _squash(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


@lru_cache(maxsize=4096)
def _term_matcher(term: str) -> tuple[re.Pattern | None, frozenset[str]]:
    """(a regex for the term as whole words, the starts of the term that count as self-identification:
    its first one, two, ... parts run together, e.g. smol, smollm, smollm2, ...), or (None, empty) for a
    term too short to count. Kept per term, not per pair of models: an arena of 200 models has 19,900
    pairs, and compiling a pair's pattern cost more than the rest of the check."""
    parts = _parts(term)
    if sum(len(p) for p in parts) < MIN_TERM:
        return None, frozenset()
    pattern = re.compile(_BEFORE + _SEP.join(re.escape(p) for p in parts) + _AFTER, re.IGNORECASE)
    starts = ("".join(parts[:k]) for k in range(1, len(parts) + 1))
    return pattern, frozenset(s for s in starts if len(s) >= MIN_TERM)


def _self_identifies(answer: str, starts: frozenset[str]) -> bool:
    for match in _SELF.finditer(answer):
        words = (match.group(1) or match.group(2) or "").split()
        for candidate in (words[:1], words[:2]):
            said = _squash(" ".join(candidate)).removesuffix("s") if candidate else ""
            said_full = _squash(" ".join(candidate))
            if candidate and candidate[0].lower().strip(".-") in COMMON_WORDS:
                break
            if said in starts or said_full in starts:
                return True
    return False


def reveals_identity(terms: Iterable[str], answers: Iterable[str]) -> bool:
    """Whether any answer names one of ``terms`` (names, aliases, families, makers of both models)."""
    matchers = [_term_matcher(t) for t in sorted({t.strip() for t in terms if t and t.strip()})]
    patterns = [pattern for pattern, _ in matchers if pattern is not None]
    if not patterns:
        return False
    starts = frozenset().union(*(term_starts for _, term_starts in matchers))
    return any(
        any(p.search(answer) for p in patterns) or _self_identifies(answer, starts) for answer in answers if answer
    )


def model_terms(name: str, family: str = "", aliases=(), maker: str = "") -> list[str]:
    """Every term that identifies one model: name, family, maker, and each alias that is a string."""
    listed = aliases if isinstance(aliases, list | tuple) else []
    return [t for t in (name, family, maker, *listed) if isinstance(t, str) and t.strip()]
