"""Read a researcher's prompt file for ``python -m evalcore categorize``: one JSON object per line.

Each line is ``{"prompt": "...", "id": "..."}`` (``id`` optional: the line number otherwise; any other
keys are carried to the output untouched). The whole file is checked before a model is loaded: a line
that is not JSON, nests too deeply, lacks a non-empty string ``prompt``, repeats an id, or a file that is
not UTF-8, too large or empty is refused with a ValueError naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalcore.boundary.boundedjson import loads

MAX_FILE_BYTES = 1 << 30
MAX_LINE_BYTES = 1 << 20
MAX_PROMPTS = 1_000_000
MAX_ID_CHARS = 200


@dataclass(frozen=True)
class PromptRecord:
    """One prompt of the file: its ``id``, text, and the line's other keys (``extra``)."""

    id: str
    prompt: str
    extra: dict = field(default_factory=dict)


def read_prompts(path: str | Path, *, limit: int | None = None) -> list[PromptRecord]:
    """The prompts of a JSON-lines file (see the module docs), at most ``limit``."""
    path = Path(path)
    try:
        size = path.stat().st_size if path.is_file() else None
    except (OSError, ValueError):
        size = None
    if size is None:
        raise ValueError(f"prompt file {str(path)[:200]!r} does not exist or is not a file")
    if size > MAX_FILE_BYTES:
        raise ValueError(f"prompt file {str(path)!r} is larger than {MAX_FILE_BYTES} bytes")
    out: list[PromptRecord] = []
    seen: set[str] = set()
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise ValueError(f"{path}: line {lineno} is longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(
                    f"{path}: line {lineno} is not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from None
            if not line.strip():
                continue
            record = loads(line, name=f"{path}: line {lineno}")
            if not isinstance(record, dict):
                raise ValueError(f'{path}: line {lineno} must be a JSON object such as {{"prompt": "..."}}')
            prompt = record.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                raise ValueError(f"{path}: line {lineno} needs a non-empty string 'prompt'")
            if "\x00" in prompt:
                raise ValueError(f"{path}: line {lineno}: the prompt contains a NUL character")
            pid = record.get("id", lineno)
            if (
                isinstance(pid, bool)
                or not isinstance(pid, str | int)
                or not 0 < len(str(pid)) <= MAX_ID_CHARS
            ):
                raise ValueError(
                    f"{path}: line {lineno}: 'id' must be a string or a whole number (1 to {MAX_ID_CHARS} characters)"
                )
            pid = str(pid)
            if pid in seen:
                raise ValueError(f"{path}: line {lineno}: id {pid[:60]!r} appears twice")
            seen.add(pid)
            out.append(
                PromptRecord(pid, prompt, {k: v for k, v in record.items() if k not in ("id", "prompt")})
            )
            if len(out) >= (limit or MAX_PROMPTS):
                break
    if not out:
        raise ValueError(f"prompt file {str(path)!r} holds no prompts")
    return out
