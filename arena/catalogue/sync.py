"""Arena models declared in a YAML file, validated and synced into the catalogue.

Format::

    models:
      - name: smollm2-135m-greedy        # public name, revealed after a vote
        backend: hf                      # hf | openai | vllm
        model_args: {path: SmolLM2-135M-Instruct, dtype: float32}
        weight: 1.0                      # relative sampling weight
        family: smollm2                  # optional: two models of one family never meet
        aliases: [SmolLM2]               # optional: other names it goes by (identity filter)
        maker: HuggingFace               # optional: who made it (identity filter)
        generation: {max_new_tokens: 256, temperature: 0.0}
        system_prompt: "..."             # optional
        queue: ""                        # optional: serve on generate.<queue> only
        organisation: HuggingFace        # optional: what the model is, and whether it was retired:
        licence: apache-2.0              #   arena.catalogue.fields lists these keys
        retired: {reason: "superseded", date: 2026-11-30}

Secrets never go in the file or the database: an ``openai`` model names the environment variable
that holds its key (``api_key_env: OPENAI_API_KEY``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.db import transaction
from django.utils import timezone

from arena.catalogue.fields import DESCRIPTION_KEYS, description_fields
from arena.models import LanguageModel
from evalcore.models.vllm_settings import check_engine_args

ENTRY_KEYS = {
    "name", "backend", "model_args", "weight", "family", "generation", "system_prompt", "queue", "aliases", "maker",
} | DESCRIPTION_KEYS  # fmt: skip
MAX_ALIASES = 20
GENERATION_LIMITS = {
    "max_new_tokens": (int, 1, 8192),
    "temperature": (float, 0.0, 2.0),
    "top_p": (float, 0.0, 1.0),
    "seed": (int, 0, 2**31 - 1),
}
SECRET_KEY_PATTERN = re.compile(r"(^|_)(api_?key|key|token|secret|password)$", re.IGNORECASE)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class SyncReport:
    created: tuple[str, ...]
    updated: tuple[str, ...]
    retired: tuple[str, ...]
    # retired before this sync (in the admin, or by an earlier file) and declared without ``retired``: back
    # in the arena, each with the retirement it cleared ("name (was retired: reason)"), so none is silent
    returned: tuple[str, ...] = ()


def _fail(where: str, problem: str):
    raise ValueError(f"{where}: {problem}")


def _number(value, kind, low, high, where):
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(where, f"expected a number, got {value!r}")
    if not low <= value <= high:  # before any float(): a YAML integer can be too large for one; NaN fails here
        _fail(where, f"must be between {low} and {high}, got {str(value)[:40]}")
    if kind is int and not float(value).is_integer():
        _fail(where, f"expected a whole number, got {value!r}")
    return kind(value)


def _entry(raw, where: str) -> dict:
    if not isinstance(raw, dict):
        _fail(where, "each model is a mapping with at least name and backend")
    unknown = sorted(set(map(str, raw)) - ENTRY_KEYS)
    if unknown:
        _fail(f"{where}.{unknown[0]}", f"unknown key; allowed keys are {sorted(ENTRY_KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        _fail(f"{where}.name", "required: 1-200 characters, letters, digits and ._:/@+- , starting with a letter or digit")
    where = f"{where} ({name})"
    backend = raw.get("backend")
    if backend not in LanguageModel.Backend.values:
        _fail(f"{where}.backend", f"must be one of {LanguageModel.Backend.values}, got {backend!r}")
    model_args = raw.get("model_args") or {}
    if not isinstance(model_args, dict):
        _fail(f"{where}.model_args", "must be a mapping")
    for key, value in model_args.items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            _fail(f"{where}.model_args.{key}", "keys are names and values are plain strings or numbers")
        if SECRET_KEY_PATTERN.search(key):
            _fail(f"{where}.model_args.{key}", "secrets never go in this file: use api_key_env: NAME_OF_VARIABLE")
    if backend == "hf" and "path" not in model_args:
        _fail(f"{where}.model_args.path", "required for the hf backend")
    if backend == "openai" and "base_url" not in model_args:
        _fail(f"{where}.model_args.base_url", "required for the openai backend")
    if backend == "vllm":
        if "path" not in model_args:
            _fail(f"{where}.model_args.path", "required for the vllm backend")
        engine_args = {k: v for k, v in model_args.items() if k not in ("path", "device", "batch_size")}
        try:  # the engine arguments, checked here rather than when a worker first loads the model
            check_engine_args(engine_args)
        except ValueError as exc:
            _fail(f"{where}.model_args", str(exc))
    generation = raw.get("generation") or {}
    if not isinstance(generation, dict):
        _fail(f"{where}.generation", "must be a mapping")
    checked_generation = {}
    for key, value in generation.items():
        if key not in GENERATION_LIMITS:
            _fail(f"{where}.generation.{key}", f"unknown; allowed: {sorted(GENERATION_LIMITS)}")
        checked_generation[key] = _number(value, *GENERATION_LIMITS[key], f"{where}.generation.{key}")
    weight = _number(raw.get("weight", 1.0), float, 0.0, 1e6, f"{where}.weight")
    texts = {}
    for key, limit in (("family", 200), ("system_prompt", 20_000), ("queue", 64), ("maker", 200)):
        value = raw.get(key) or ""
        if not isinstance(value, str) or len(value) > limit:
            _fail(f"{where}.{key}", f"must be text of at most {limit} characters")
        texts[key] = value
    aliases = raw.get("aliases") or []
    if (
        not isinstance(aliases, list)
        or len(aliases) > MAX_ALIASES
        or not all(isinstance(a, str) and 0 < len(a.strip()) <= 200 for a in aliases)
    ):
        _fail(f"{where}.aliases", f"must be a list of at most {MAX_ALIASES} names of 1-200 characters")
    described = description_fields(raw, where)
    described["organisation"] = described["organisation"] or texts["maker"]
    return {
        **described,
        "name": name,
        "backend": backend,
        "model_args": model_args,
        "generation": checked_generation,
        "weight": weight,
        "family": texts["family"],
        "aliases": [a.strip() for a in aliases],
        "maker": texts["maker"],
        "system_prompt": texts["system_prompt"],
        "queue_suffix": texts["queue"],
    }


def catalogue_parse(path: Path) -> list[dict]:
    """Read and validate the YAML file; a ValueError names the file, entry and key at fault."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES} bytes; is this the right file?")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("models"), list):
        raise ValueError(f"{path}: expected a mapping with a 'models' list")
    entries = [_entry(raw, f"{path}: models[{index}]") for index, raw in enumerate(document["models"])]
    names = [entry["name"] for entry in entries]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{path}: model {duplicates[0]!r} is declared twice")
    return entries


UNDECLARED_REASON = "removed from the arena's catalogue file without a stated reason"


def _retirement(existing: LanguageModel | None, retired) -> dict:
    """The retirement fields for a declared entry: its date (else the one already recorded, else now)."""
    if retired is None:
        return {"retired_at": None, "retired_reason": ""}
    when, reason = retired
    if when is None:
        when = existing.retired_at if existing is not None and existing.retired_at else timezone.now()
    return {"retired_at": when, "retired_reason": reason}


@transaction.atomic
def catalogue_sync(entries: list[dict]) -> SyncReport:
    """Upsert the declared models into the arena. A model with ``retired`` stops battling and keeps its
    votes and rating; an arena model no longer declared leaves the arena and is retired too (no removal
    is silent: the public list of retirements shows it, with :data:`UNDECLARED_REASON`). ``retired`` in the
    report names the models retired by this sync; ``returned`` those it brought back (a retirement made
    in the admin is cleared by a file that still declares the model without ``retired``: the report says
    so, and the admin warns when such a model is retired)."""
    created, updated, retired, returned = [], [], [], []
    for entry in entries:
        entry = dict(entry)
        existing = LanguageModel.objects.filter(name=entry["name"]).first()
        fields = _retirement(existing, entry.pop("retired", None))
        model, was_created = LanguageModel.objects.update_or_create(
            name=entry["name"], defaults={**entry, **fields, "in_arena": True}
        )
        model.full_clean()
        (created if was_created else updated).append(model.name)
        if fields["retired_at"] is not None and (existing is None or existing.retired_at is None):
            retired.append(model.name)
        if fields["retired_at"] is None and existing is not None and existing.retired_at is not None:
            returned.append(f"{model.name} (was retired: {existing.retired_reason})")
    declared = [entry["name"] for entry in entries]
    leaving = LanguageModel.objects.filter(in_arena=True).exclude(name__in=declared)
    retired += leaving.values_list("name", flat=True)
    leaving.filter(retired_at__isnull=True).update(
        retired_at=timezone.now(), retired_reason=UNDECLARED_REASON
    )
    leaving.update(in_arena=False)
    return SyncReport(tuple(created), tuple(updated), tuple(retired), tuple(returned))
