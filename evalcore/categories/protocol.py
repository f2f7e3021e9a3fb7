"""Category protocols: a YAML file saying how a tagger model decides whether a prompt is in a category.

A category protocol is a judge protocol for one prompt: a prompt template, a verdict format and (at
run time) the model that applies it::

    name: coding
    category: coding                  # the category it tags (the board's ?category=coding)
    version: 1                        # bump with every change of meaning (recorded on every tag)
    source: https://...               # optional, recorded
    description: ...                  # optional
    system: You decide whether ...    # optional system message
    user: "[Prompt]\\n{prompt}"       # the one placeholder is {prompt}
    verdict:
      method: logprob                 # P(yes) / (P(yes) + P(no)) after each criterion's prefix
      answers: {yes: " yes", no: " no"}
      criteria:
        - {name: code, prefix: "Does the prompt ask for code or about programming?"}
      threshold: 1                    # the prompt is in the category when at least this many are yes

or ``method: generate`` with ``max_new_tokens``: the tagger writes one line ``<name>: yes|no`` per
criterion (the prefix, if given, is the question it answers). A criterion's answer is yes when
P(yes) > 0.5 (log-prob) or when its line says yes; a generated answer missing a criterion, or saying
both, fails that tag (recorded, never guessed). ``category`` follows the site's rule for tagged
categories (``[a-z_]+``, not one of the built-in ones). An unknown key, a placeholder other than
``{prompt}``, a threshold above the number of criteria or a criterion listed twice is refused with a
ValueError naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalcore.boundary.validation import yaml_problem

MAX_PROTOCOL_BYTES = 64 * 1024
MAX_CRITERIA = 32
MAX_TEXT_CHARS = 16_000
BUNDLED_DIR = Path(__file__).resolve().parent / "protocols"
TOP_KEYS = {"name", "category", "version", "source", "description", "system", "user", "verdict"}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
CATEGORY_NAME = re.compile(r"[a-z_]{1,48}")
CRITERION_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")
# Categories the refit makes from the votes themselves: a tagger may not claim their names.
RESERVED = {"overall", "multi_turn", "long_prompt", "language"}


@dataclass(frozen=True)
class Criterion:
    """One yes/no question: ``name`` (``[a-z][a-z0-9_]*``) and the ``prefix`` the answer follows."""

    name: str
    prefix: str


@dataclass(frozen=True)
class CategoryProtocol:
    """A validated category protocol (see the module docs). ``sha256`` covers everything that changes a
    tag (system, user, verdict, threshold, category), not the name, version, source or description."""

    name: str
    category: str
    version: str
    user: str
    method: str
    criteria: tuple[Criterion, ...]
    threshold: int
    system: str | None = None
    yes: str = " yes"
    no: str = " no"
    max_new_tokens: int = 0
    source: str = ""
    description: str = ""

    def as_dict(self) -> dict:
        verdict: dict = {"method": self.method, "threshold": self.threshold,
                         "criteria": [{"name": c.name, "prefix": c.prefix} for c in self.criteria]}  # fmt: skip
        if self.method == "logprob":
            verdict["answers"] = {"yes": self.yes, "no": self.no}
        else:
            verdict["max_new_tokens"] = self.max_new_tokens
        return {"name": self.name, "category": self.category, "version": self.version, "system": self.system,
                "user": self.user, "verdict": verdict, "source": self.source, "description": self.description}  # fmt: skip

    @property
    def sha256(self) -> str:
        data = self.as_dict()
        content = {k: data[k] for k in ("category", "system", "user", "verdict")}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def messages(self, prompt: str) -> list[dict]:
        """The tagger conversation, ``[system (if any), user]``; ``{prompt}`` filled in one pass (text in
        the prompt that looks like a placeholder is left alone)."""
        user = PLACEHOLDER.sub(lambda m: prompt, self.user)
        return [
            *([{"role": "system", "content": self.system}] if self.system else []),
            {"role": "user", "content": user},
        ]

    def generate_instructions(self) -> str:
        """What a generating tagger is asked to write (appended to the user message)."""
        lines = "\n".join(f"{c.name}: yes or no ({c.prefix.strip()})" if c.prefix else f"{c.name}: yes or no"
                          for c in self.criteria)  # fmt: skip
        return f"\n\nAnswer with exactly one line per criterion, in this form:\n{lines}"


def bundled_category_protocols() -> dict[str, Path]:
    """Name (file stem) -> path of every category protocol shipped with evalcore."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.yaml"))}


def load_category_protocol(source: str | Path) -> CategoryProtocol:
    """Read and validate a category protocol from a YAML file, or a bundled one by name."""
    bundled = bundled_category_protocols()
    text = str(source)
    path = bundled[text] if text in bundled and not Path(text).exists() else Path(text)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        is_file = False
    if not is_file:
        raise ValueError(
            f"category protocol {text[:200]!r} is neither a file nor a bundled protocol ({', '.join(bundled)})"
        )
    if path.stat().st_size > MAX_PROTOCOL_BYTES:
        raise ValueError(f"category protocol file {str(path)!r} is larger than {MAX_PROTOCOL_BYTES} bytes")
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(
            f"category protocol file {str(path)!r} is not valid YAML: {yaml_problem(exc)}"
        ) from None
    return category_protocol_from_dict(data, where=str(path))


def _string(
    data: dict, key: str, where: str, *, required: bool = False, limit: int = MAX_TEXT_CHARS
) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ValueError(f"{where}: missing key {key!r}")
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key!r} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{where}: {key!r} is longer than {limit} characters")
    if "\x00" in value:
        raise ValueError(f"{where}: {key!r} contains a NUL character")
    return value


def _only_keys(data: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0][:60]!r}; allowed: {', '.join(sorted(allowed))}")


def category_protocol_from_dict(data, *, where: str = "category protocol") -> CategoryProtocol:
    """Validate a parsed protocol mapping (see the module docs); ``where`` prefixes error messages."""
    if not isinstance(data, dict):
        raise ValueError(
            f"{where}: a category protocol must be a mapping with name, category, user and verdict"
        )
    _only_keys(data, TOP_KEYS, where)
    name = _string(data, "name", where, required=True, limit=100)
    category = _string(data, "category", where, required=True, limit=64)
    if not CATEGORY_NAME.fullmatch(category):
        raise ValueError(
            f"{where}: category {category[:60]!r} must be 1 to 48 of a-z and _ (e.g. creative_writing)"
        )
    if category in RESERVED:
        raise ValueError(
            f"{where}: category {category!r} is one the site makes itself ({', '.join(sorted(RESERVED))})"
        )
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int | str) or not 0 < len(str(version)) <= 40:
        raise ValueError(f"{where}: version must be a number or a short string")
    user = _string(data, "user", where, required=True)
    system = _string(data, "system", where) or None
    for label, template in (("user", user), ("system", system or "")):
        for found in PLACEHOLDER.findall(template):
            if found != "prompt":
                raise ValueError(
                    f"{where}: {label} template has placeholder {{{found}}}; the only one is {{prompt}}"
                )
    if "{prompt}" not in user:
        raise ValueError(f"{where}: user template is missing the placeholder {{prompt}}")
    verdict = data.get("verdict")
    if not isinstance(verdict, dict):
        raise ValueError(f"{where}: verdict must be a mapping with method, criteria and threshold")
    method = verdict.get("method")
    if method not in ("logprob", "generate"):
        raise ValueError(f"{where}: verdict method {str(method)[:40]!r} is not logprob or generate")
    allowed = {"method", "criteria", "threshold", "answers" if method == "logprob" else "max_new_tokens"}
    _only_keys(verdict, allowed, f"{where}: verdict")
    criteria = _criteria(verdict.get("criteria"), where)
    threshold = verdict.get("threshold", len(criteria))
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= len(criteria):
        raise ValueError(
            f"{where}: verdict threshold must be a whole number from 1 to {len(criteria)} (the criteria)"
        )
    fields: dict = {}
    if method == "logprob":
        answers = verdict.get("answers", {"yes": " yes", "no": " no"})
        if isinstance(answers, dict):  # YAML 1.1 reads an unquoted yes/no key as true/false
            answers = {
                {True: "yes", False: "no"}.get(k, k) if isinstance(k, bool) else k: v
                for k, v in answers.items()
            }
        if not isinstance(answers, dict) or set(map(str, answers)) != {"yes", "no"}:
            raise ValueError(f"{where}: verdict answers must be a mapping with exactly the keys yes and no")
        if (
            not all(isinstance(v, str) and v and len(v) <= 40 for v in answers.values())
            or answers["yes"] == answers["no"]
        ):
            raise ValueError(f"{where}: verdict answers yes and no must be two different non-empty strings")
        fields.update(yes=answers["yes"], no=answers["no"])
    else:
        max_new = verdict.get("max_new_tokens")
        if isinstance(max_new, bool) or not isinstance(max_new, int) or not 1 <= max_new <= 4096:
            raise ValueError(f"{where}: verdict max_new_tokens must be a whole number from 1 to 4096")
        fields["max_new_tokens"] = max_new
    return CategoryProtocol(
        name=name, category=category, version=str(version), user=user, system=system, method=method,
        criteria=criteria, threshold=threshold, source=_string(data, "source", where, limit=1000) or "",
        description=_string(data, "description", where) or "", **fields,
    )  # fmt: skip


def _criteria(items, where: str) -> tuple[Criterion, ...]:
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: verdict criteria must be a non-empty list of {{name, prefix}}")
    if len(items) > MAX_CRITERIA:
        raise ValueError(f"{where}: verdict has {len(items)} criteria; at most {MAX_CRITERIA}")
    out, seen = [], set()
    for index, item in enumerate(items, start=1):
        label = f"{where}: criterion {index}"
        if not isinstance(item, dict):
            raise ValueError(f"{label} must be a mapping with name and prefix")
        _only_keys(item, {"name", "prefix"}, label)
        name = _string(item, "name", label, required=True, limit=48)
        if not CRITERION_NAME.fullmatch(name):
            raise ValueError(
                f"{label}: name {name[:60]!r} must be lowercase letters, digits and _ (a letter first)"
            )
        if name in seen:
            raise ValueError(f"{label}: name {name!r} is listed twice")
        seen.add(name)
        out.append(Criterion(name=name, prefix=_string(item, "prefix", label, limit=1000) or ""))
    return tuple(out)
