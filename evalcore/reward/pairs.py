"""Preference pairs for reward models, read from the judge audit's pairs files (LLMBar's format).

Each file is one category: ``NAME=PATH`` names it, a bare ``PATH`` takes the file's stem. Records are
read by :func:`evalcore.judging.records.read_pairs` (the same rules and messages as ``judge audit``);
this module adds what a reward run needs on top: a bound on each text (a reward model reads the
whole conversation at once), distinct category names, chosen/rejected from ``label``, and each record's
optional ``subset`` (RewardBench's records name theirs: ``alpacaeval-easy``, ``math-prm``, ...).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evalcore.judging.records import read_pairs

MAX_FIELD_CHARS = 200_000
MAX_FILES = 64
MAX_SUBSETS = 256  # distinct subsets in one file (RewardBench has 23)
CATEGORY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class RewardPair:
    """One prompt with the answer people preferred (``chosen``) and the other (``rejected``).

    ``pair_id`` is ``<category>/<index in its file>``; ``label`` is the file's (1: output_1 chosen);
    ``subset`` is the record's ``subset`` (None when its file names none).
    """

    pair_id: str
    category: str
    prompt: str
    chosen: str
    rejected: str
    label: int
    subset: str | None = None


@dataclass(frozen=True)
class PairsFile:
    """A pairs file as read: its category, path, SHA-256 of its bytes and number of pairs."""

    category: str
    path: str
    sha256: str
    pairs: int

    def as_dict(self) -> dict:
        return {"category": self.category, "path": self.path, "sha256": self.sha256, "pairs": self.pairs}


def parse_pairs_spec(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` -> (category, path); the category is checked by :data:`CATEGORY_NAME`."""
    name, sep, rest = spec.partition("=")
    if sep and CATEGORY_NAME.fullmatch(name) and rest:
        return name, Path(rest)
    path = Path(spec)
    stem = path.stem
    if not CATEGORY_NAME.fullmatch(stem):
        raise ValueError(f"pairs file {spec!r}: its name {stem[:40]!r} is not a category name "
                         "(letters, digits, _ . -; up to 64); give one as NAME=PATH")  # fmt: skip
    return stem, path


def read_reward_pairs(
    specs: Sequence[str], *, max_field_chars: int = MAX_FIELD_CHARS
) -> tuple[list[RewardPair], list[PairsFile]]:
    """Read every pairs file (one category each) into chosen/rejected pairs.

    Raises ValueError naming the file and pair for anything :func:`read_pairs` refuses (malformed
    JSON, a missing or non-string field, an empty text, a label other than 1 or 2, an empty file), a
    text longer than ``max_field_chars`` characters, or two files with one category name.
    """
    if not specs:
        raise ValueError("give at least one pairs file")
    if len(specs) > MAX_FILES:
        raise ValueError(f"at most {MAX_FILES} pairs files, got {len(specs)}")
    pairs: list[RewardPair] = []
    files: list[PairsFile] = []
    for spec in specs:
        category, path = parse_pairs_spec(spec)
        if any(f.category == category for f in files):
            raise ValueError(f"two pairs files make category {category!r}; name them NAME=PATH")
        try:
            items = read_pairs(path)
        except ValueError as exc:  # with several files, every message names its file
            raise ValueError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
        subsets = _subsets(path, len(items))
        for item, subset in zip(items, subsets):
            for field, text in (
                ("input", item.question),
                ("output_1", item.answer_1),
                ("output_2", item.answer_2),
            ):
                if len(text) > max_field_chars:
                    raise ValueError(f"{path}: pair {item.pair_id}: field {field!r} has {len(text)} characters, "
                                     f"more than {max_field_chars}")  # fmt: skip
            chosen, rejected = (
                (item.answer_1, item.answer_2) if item.label == 1 else (item.answer_2, item.answer_1)
            )
            pairs.append(
                RewardPair(
                    f"{category}/{item.pair_id}", category, item.question, chosen, rejected, item.label, subset
                )
            )
        files.append(PairsFile(category, str(path), _sha256(path), len(items)))
    return pairs, files


def _subsets(path: Path, count: int) -> list[str | None]:
    """Each record's ``subset`` in file order (all None when no record has one), from a file that
    :func:`read_pairs` has accepted (so it parses, as a JSON list or as JSONL). Every record names one
    or none does; a subset is a name like a category's (letters, digits, _ . -; up to 64)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        records = json.loads(text)
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    if len(records) != count:  # the file changed under us
        raise ValueError(f"{path}: the file changed while it was read")
    present = [i for i, r in enumerate(records) if "subset" in r]
    if not present:
        return [None] * count
    if len(present) != count:
        missing = next(i for i, r in enumerate(records) if "subset" not in r)
        raise ValueError(f"{path}: pair {missing} has no 'subset' while pair {present[0]} has one; "
                         "give every pair a subset or none")  # fmt: skip
    subsets = []
    for i, record in enumerate(records):
        subset = record["subset"]
        if not isinstance(subset, str) or not CATEGORY_NAME.fullmatch(subset):
            raise ValueError(f"{path}: pair {i}: 'subset' must be a name (letters, digits, _ . -; up to 64 "
                             f"characters), got {str(subset)[:40]!r}")  # fmt: skip
        subsets.append(subset)
    if len(set(subsets)) > MAX_SUBSETS:
        raise ValueError(f"{path}: more than {MAX_SUBSETS} distinct subsets")
    return subsets


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()
