"""The checks on a checkpoint's file list (names, sizes, required files), before any file is opened.

The rules and their messages live in ``checkpoint_rules.json`` beside this module: the server applies
them here, and the submit page embeds the same file (with this server's limits) for
``static/js/checkpoint-rules.js``, which applies them in the browser before a byte is sent.
``tests/leaderboard/test_upload_rules.py`` runs both over the same hostile lists and compares the
messages. A change to a rule is made in the JSON file, or in both implementations at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

RULES_PATH = Path(__file__).with_name("checkpoint_rules.json")
RULES: dict = json.loads(RULES_PATH.read_text(encoding="utf-8"))
MESSAGES: dict[str, str] = RULES["messages"]
SAFETENSORS: str = RULES["weights_suffix"]
PICKLE_SUFFIXES = tuple(RULES["pickle_suffixes"])
CODE_SUFFIXES = tuple(RULES["code_suffixes"])
DATA_SUFFIXES = tuple(RULES["data_suffixes"])
CONFIG: str = RULES["config"]
INDEX: str = RULES["index"]
TOKENIZER_FILES = frozenset(RULES["tokenizer_files"])
MAX_NAME_LENGTH: int = RULES["max_name_length"]
SHOWN_NAME_LENGTH: int = RULES["shown_name_length"]
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def say(key: str, **values: object) -> str:
    """The message ``key`` with its placeholders filled in one pass (a name holding ``{x}`` stays as it is)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), MESSAGES[key])


BIDI_CONTROLS = frozenset([0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def is_control(character: str) -> bool:
    """C0 and C1 control characters, DEL, and the bidirectional controls (U+202E and friends, which make
    ``txt.exe`` look like ``exe.txt``): never part of a file name we accept."""
    code = ord(character)
    return code < 32 or 127 <= code < 160 or code in BIDI_CONTROLS


def shown(name: str) -> str:
    """``name`` as printable ASCII (Python's unicode_escape), cut to a readable length."""
    return name.encode("unicode_escape").decode("ascii")[:SHOWN_NAME_LENGTH]


def file_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file of a checkpoint, or None."""
    if any(is_control(c) for c in name):
        return say("control_characters", shown=shown(name))
    if not name.replace("\ufeff", " ").strip():  # JavaScript's trim() also drops U+FEFF; Python's strip() does not
        return say("empty_name")
    if "/" in name or "\\" in name or ".." in name:
        return say("path", shown=shown(name))
    if len(name) > MAX_NAME_LENGTH:
        return say("long_name", shown=shown(name), max_name_length=MAX_NAME_LENGTH)
    lower = name.lower()
    if lower.endswith(PICKLE_SUFFIXES):
        return say("pickle", name=name)
    if lower.endswith(CODE_SUFFIXES):
        return say("code", name=name)
    if not lower.endswith((SAFETENSORS, *DATA_SUFFIXES)):
        return say("not_checkpoint", name=name)
    return None


def file_list_problems(files: Iterable[tuple[str, int]], *, max_files: int, max_bytes: int) -> list[str]:
    """Every problem with a list of ``(name, size)``: counts, sizes and names first; when those are
    right, the files a checkpoint cannot do without. Nothing here opens a file."""
    files = list(files)
    if not files:
        return [say("no_files")]
    errors = []
    if len(files) > max_files:
        errors.append(say("too_many_files", count=len(files), max_files=max_files))
    total = sum(size for _, size in files)
    if total > max_bytes:
        errors.append(say("too_many_bytes", total=total, max_bytes=max_bytes))
    names: set[str] = set()
    for name, size in files:
        problem = file_name_problem(name)
        if problem:
            errors.append(problem)
        elif name in names:
            errors.append(say("twice", name=name))
        elif size == 0:
            errors.append(say("empty_file", name=name))
        names.add(name)
    if errors:
        return errors
    if CONFIG not in names:
        errors.append(say("no_config"))
    if not TOKENIZER_FILES & names:
        errors.append(say("no_tokenizer"))
    weights = [n for n in names if n.lower().endswith(SAFETENSORS)]
    if not weights:
        errors.append(say("no_weights"))
    elif len(weights) > 1 and INDEX not in names:
        errors.append(say("no_index", count=len(weights), index=INDEX))
    return errors


def browser_rules(*, max_files: int, max_bytes: int) -> dict:
    """What the submit page embeds for the browser's checks: the rules file and this server's limits."""
    return {**RULES, "max_files": max_files, "max_bytes": max_bytes}
