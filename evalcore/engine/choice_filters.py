"""Filters that need more than one regex: choice letters, part-of-speech tags, entity spans.

Semantics follow lm-evaluation-harness 0.4.x:

- ``multi_choice_regex``: first the pattern (``group_select`` into all matches; a tuple match
  gives its first non-empty group); if nothing matches, the text of one of the document's
  ``choices`` (compared after ``regexes_to_ignore``, ``ignore_case``, ``ignore_punctuation``, the
  longest choice tried first) becomes its letter ``(A)``, ``(B)``, ...; else a bare letter after
  a colon (``": B"``) becomes ``(B)``; else ``fallback``.
- ``regex_pos``: the tags of ``('token', 'TAG')`` pairs in the text, or ``fallback`` (``["invalid"]``).
- ``format_span``: entity lists such as ``"Person: Ann, Bob $$ Location: Kenya"`` normalised to
  ``"per: ann $ per: bob $ loc: kenya"``.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Callable


@functools.cache
def _punctuation() -> dict[int, None]:
    """Every Unicode punctuation character, deleted by ``str.translate`` (built once, when first needed:
    scanning the code points takes 0.1 s, which every process that imports the engine would pay)."""
    return {i: None for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i)).startswith("P")}


def _first_match(pattern: re.Pattern, text, group_select: int) -> str:
    found = pattern.findall(text if isinstance(text, str) else "")
    if not found:
        return ""
    match = found[group_select]
    if isinstance(match, tuple):
        groups = [g for g in match if g]
        if not groups:
            return ""
        match = groups[0]
    return match.strip()


def multi_choice_regex(step: dict) -> Callable[[list, dict], list]:
    pattern = re.compile(step.get("regex_pattern", r"#### (\-?[0-9\.\,]+)"))
    group_select = int(step.get("group_select", 0))
    fallback = step.get("fallback", "[invalid]")
    ignores = list(step.get("regexes_to_ignore") or ())
    ignore_case, ignore_punctuation = bool(step.get("ignore_case")), bool(step.get("ignore_punctuation"))

    def normalise(text: str) -> str:
        for ignored in ignores:
            text = re.sub(ignored, "", text)
        if ignore_case:
            text = text.lower()
        if ignore_punctuation:
            text = text.translate(_punctuation())
        return text

    def apply(responses: list, doc: dict) -> list:
        if "choices" not in doc:
            raise ValueError("filter multi_choice_regex needs a 'choices' field in each document")
        letters = [chr(ord("A") + i) for i in range(len(doc["choices"]))]
        by_text = {normalise(str(c).strip()): f"({letter})" for c, letter in zip(doc["choices"], letters)}
        texts = sorted((re.escape(t) for t in by_text), key=len, reverse=True)
        choice_pattern = re.compile("|".join(texts))
        letter_pattern = re.compile(rf":[\s]*({'|'.join(letters)})")
        out = []
        for response in responses:
            answer = _first_match(pattern, response, group_select)
            if not answer:
                found = _first_match(choice_pattern, normalise(response if isinstance(response, str) else ""), group_select)
                answer = by_text.get(found, found)
            if not answer:
                found = _first_match(letter_pattern, response, group_select)
                answer = f"({found})" if found else ""
            out.append(answer or fallback)
        return out

    return apply


def regex_pos(step: dict) -> Callable[[list], list]:
    fallback = step.get("fallback") or ["invalid"]
    pairs = re.compile(r"\('([^']*)', '([^']*)'\)")

    def tags(response) -> list:
        found = [tag for _, tag in pairs.findall(response)] if isinstance(response, str) else [t for _, t in response]
        return found or fallback

    return lambda responses: [tags(r) for r in responses]


_LABELS = {
    "person": "PER", "location": "LOC", "organization": "ORG", "counties": "LOC", "places": "LOC",
    "people": "PER", "persons": "PER", "company": "ORG", "country": "LOC", "continent": "LOC",
    "time": "DATE", "date": "DATE", "per": "PER", "loc": "LOC", "org": "ORG",
}  # fmt: skip
_ENTITY = re.compile(r"\b(PER|LOC|ORG|DATE):\s*([^$]+)")


def format_span(response: str) -> str:
    text = response.lower()
    for word, label in _LABELS.items():
        text = re.sub(rf"\b{re.escape(word)}\s*:", f"{label}:", text)
    text = "$".join(text.split("$$")).rstrip("$")
    text = text.replace("\n", "$").strip()
    entities = []
    for label, values in _ENTITY.findall(text):
        for value in (v.strip() for v in values.split(",")):
            if value.lower() != "none":
                entities.append(f"{label.lower()}: {value}")
    return " $ ".join(entities)
