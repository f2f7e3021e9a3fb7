"""A small language guesser for prompts: the script first, then common words for Latin script.

Good enough to group votes by language for per-category ratings; it returns "" when unsure rather
than guess.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

SCRIPT_LANGUAGE = {
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "HANGUL": "ko",
    "CJK": "zh",
    "CYRILLIC": "ru",
    "ARABIC": "ar",
    "HEBREW": "he",
    "GREEK": "el",
    "DEVANAGARI": "hi",
    "THAI": "th",
    "BENGALI": "bn",
    "TAMIL": "ta",
}

COMMON_WORDS = {
    # English's own articles and pronouns ("a" is also Portuguese's: without them a short English prompt
    # with two or three "a"s was guessed Portuguese, as 4 of 40 prompts in a walk-through were)
    "en": "the and is are of to in that it for what how you with this can be on why a an i my me your do does "
    "write give explain about from at by or if not all which who will would should could has have was were "
    "there their they we he she",
    "de": "der die das und ist nicht ich wie was ein eine zu mit den von für auf",
    "fr": "le la les et est un une des que qui pour dans ce pas vous avec sur",
    "es": "el la los las y es un una que de en por para con no qué cómo se",
    "it": "il lo la gli le e è un una che di per non con come sono del della",
    "pt": "o a os as e é um uma que de em para com não como do da se",
    "nl": "de het een en is van ik niet dat die wat hoe met voor op zijn",
}
WORD_SETS = {lang: set(words.split()) for lang, words in COMMON_WORDS.items()}
WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@lru_cache(maxsize=4096)
def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    return next((s for s in SCRIPT_LANGUAGE if name.startswith(s)), "LATIN" if "LATIN" in name else "")


def detect_language(text: str) -> str:
    """An ISO 639-1 code for ``text``, or "" when it cannot tell."""
    scripts: Counter[str] = Counter()
    sample = text[:2000]
    ascii_letters = sum(1 for char in sample if char.isascii() and char.isalpha())
    if ascii_letters:
        scripts["LATIN"] = ascii_letters  # the common case, without a Unicode name lookup per letter
    for char in sample:
        if not char.isascii() and char.isalpha():
            scripts[_script(char)] += 1
    if not scripts:
        return ""
    script, count = scripts.most_common(1)[0]
    if script in SCRIPT_LANGUAGE and count >= 2:
        if script == "CJK" and (scripts["HIRAGANA"] or scripts["KATAKANA"]):
            return "ja"
        return SCRIPT_LANGUAGE[script]
    if script != "LATIN":
        return ""
    words = [w.lower() for w in WORD.findall(text[:2000])]
    if len(words) < 3:
        return ""
    hits = {lang: sum(w in vocabulary for w in words) for lang, vocabulary in WORD_SETS.items()}
    best = max(hits, key=hits.get)
    ranked = sorted(hits.values(), reverse=True)
    if ranked[0] < 2 or ranked[0] == ranked[1]:
        return ""
    return best
