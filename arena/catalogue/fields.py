"""The catalogue file's description and retirement keys, validated (:mod:`arena.catalogue.sync` reads the rest).

Keys (all optional)::

    organisation: HuggingFace                # who publishes it (shown, filterable)
    licence: apache-2.0                      # shown, filterable
    parameters: 135M                         # parameter count where known: a whole number, or 135M, 1.7B, 1T
    open_weights: true                       # anyone may download the weights (default false)
    knowledge_cutoff: 2024-06                # YYYY, YYYY-MM or YYYY-MM-DD
    link: https://huggingface.co/...         # http(s)
    public: false                            # tested in the arena but not shown on the board (default true)
    name_withheld: true                      # with public: false, the public record withholds the name
    retired: {reason: "superseded", date: 2026-11-30}   # no longer battles; votes and rating stay

A problem raises ValueError naming the entry and key, as the rest of the file's checks do.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

from arena.models.catalogue import CUTOFF_PATTERN, MAX_PARAMETERS
from common.query import LICENCE_PATTERN, ORGANISATION_PATTERN

DESCRIPTION_KEYS = {
    "organisation", "licence", "parameters", "open_weights", "knowledge_cutoff", "link", "public", "name_withheld",
    "retired",
}  # fmt: skip
_SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_PARAMETERS = re.compile(r"^(\d{1,6}(?:\.\d{1,3})?)\s*([KMBT])$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def _fail(where: str, problem: str):
    raise ValueError(f"{where}: {problem}")


def _text(raw, where: str, limit: int) -> str:
    value = "" if raw is None else raw
    if not isinstance(value, str) or len(value) > limit or _CONTROL.search(value):
        _fail(where, f"must be one line of text of at most {limit} characters")
    return value.strip()


def _flag(raw, where: str, default: bool) -> bool:
    if raw is None:
        return default
    if not isinstance(raw, bool):
        _fail(where, f"must be true or false, got {str(raw)[:40]!r}")
    return raw


def parameter_count(raw, where: str) -> int | None:
    """A parameter count: a whole number, or a number with K, M, B or T (135M, 1.7B); None when absent."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        _fail(where, "expected a whole number or a size such as 135M or 1.7B")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and (match := _PARAMETERS.match(raw.strip())):
        value = round(float(match.group(1)) * _SUFFIXES[match.group(2).upper()])
    else:
        _fail(where, f"expected a whole number or a size such as 135M or 1.7B, got {str(raw)[:40]!r}")
    if not 1 <= value <= MAX_PARAMETERS:
        _fail(where, f"must be between 1 and {MAX_PARAMETERS:,} (100T)")
    return value


def _cutoff(raw, where: str) -> str:
    if raw is None or raw == "":
        return ""
    if isinstance(raw, date):  # YAML reads 2024-06-01 as a date
        raw = raw.isoformat()
    elif isinstance(raw, int) and not isinstance(raw, bool):  # ... and 2024 as a number
        raw = str(raw)
    if not isinstance(raw, str) or not re.fullmatch(CUTOFF_PATTERN[1:-1], raw.strip()):
        _fail(where, f"must be YYYY, YYYY-MM or YYYY-MM-DD, got {str(raw)[:40]!r}")
    return raw.strip()


def _link(raw, where: str) -> str:
    value = _text(raw, where, 500)
    if value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or " " in value:
            _fail(where, f"must be an http(s) address, got {value[:60]!r}")
    return value


def _retired(raw, where: str) -> tuple[datetime | None, str] | None:
    """(date or None, reason) of a retirement, or None when the model is not retired."""
    if raw is None or raw is False:
        return None
    if isinstance(raw, str):
        raw = {"reason": raw}
    if not isinstance(raw, dict) or set(map(str, raw)) - {"reason", "date"}:
        _fail(where, "must be a reason, or a mapping with reason and (optional) date")
    reason = _text(raw.get("reason"), f"{where}.reason", 300)
    if not reason:
        _fail(f"{where}.reason", "required: why the model was retired is shown publicly")
    when = raw.get("date")
    if when is None:
        return None, reason
    if isinstance(when, str):
        try:
            when = date.fromisoformat(when.strip())
        except ValueError:
            _fail(f"{where}.date", f"must be a date YYYY-MM-DD, got {when[:40]!r}")
    if isinstance(when, datetime):
        when = when.date()
    if not isinstance(when, date):
        _fail(f"{where}.date", f"must be a date YYYY-MM-DD, got {str(when)[:40]!r}")
    if when > datetime.now(UTC).date():
        _fail(f"{where}.date", f"is in the future ({when}); retire a model when it leaves")
    return datetime(when.year, when.month, when.day, tzinfo=UTC), reason


def description_fields(raw: dict, where: str) -> dict:
    """The description keys of one entry as catalogue fields, plus ``retired`` ((date, reason) or None)."""
    licence = _text(raw.get("licence"), f"{where}.licence", 100)
    if licence and not re.fullmatch(LICENCE_PATTERN[1:-1], licence):
        _fail(f"{where}.licence", "letters, digits and .+_()/- only, such as apache-2.0 or llama3.1")
    public = _flag(raw.get("public"), f"{where}.public", True)
    withheld = _flag(raw.get("name_withheld"), f"{where}.name_withheld", False)
    if withheld and public:
        _fail(
            f"{where}.name_withheld",
            "only a model that is not public (public: false) can have its name withheld",
        )
    organisation = _text(raw.get("organisation"), f"{where}.organisation", 200)
    if organisation and not re.fullmatch(ORGANISATION_PATTERN[1:-1], organisation):
        _fail(f"{where}.organisation", "must be one line of text without invisible or control characters")
    return {
        "organisation": organisation,
        "licence": licence,
        "parameter_count": parameter_count(raw.get("parameters"), f"{where}.parameters"),
        "open_weights": _flag(raw.get("open_weights"), f"{where}.open_weights", False),
        "knowledge_cutoff": _cutoff(raw.get("knowledge_cutoff"), f"{where}.knowledge_cutoff"),
        "link": _link(raw.get("link"), f"{where}.link"),
        "public": public,
        "name_withheld": withheld,
        "retired": _retired(raw.get("retired"), f"{where}.retired"),
    }
