"""Versioned data releases: what the arena published, as files researchers' tools load.

A release is one folder, laid out as a Hugging Face dataset repository (``datasets.load_dataset(folder,
"battles")`` reads it; its ``README.md`` front matter names the configs):

- ``data/battles.parquet``: every battle published when the release's snapshot was made (moderated, not
  held, vote covered by the snapshot and old enough), conversations redacted (arena/publication/redaction.py), in
  FastChat's ``clean_battle`` layout (``conversation_a``/``conversation_b`` as role/content lists);
- ``data/votes.parquet``: every counted vote the snapshot covers, in the columns of ``/api/votes.csv``
  (FastChat's, plus style counts): ``python -m evalcore rate data/votes.parquet`` reproduces the
  snapshot's ratings;
- ``data/ratings.parquet``: every method's and category's ratings at the snapshot's refit, of the models
  shown publicly (the board's rule, :func:`arena.catalogue.selectors.rows_public`);
- ``README.md``: the dataset card (fields, counts, date range, licence, redaction and moderation with
  their versions, what was held back and why, how to reproduce the ratings);
- ``SHA256SUMS``: ``sha256sum -c`` checks every other file.

The folder is written under a temporary name and renamed when complete; a version (date and snapshot
id) is written once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db.models import Count

from arena.catalogue.selectors import BoardFilters, descriptions, rows_public, settings_public
from arena.models import BattleHold, DataRelease, RatingSnapshot, Vote
from arena.models.catalogue import public_name
from arena.play.base import ArenaError
from arena.publication import selectors as publication_selectors
from arena.publication.moderation import MODERATION_VERSION
from arena.publication.redaction import turn_public
from arena.votes import selectors
from evalcore.privacy.redact import REDACTOR_VERSION

LICENCE = "cc-by-4.0"
BATTLE_BATCH = 500
VOTE_BATCH = 50_000


def _pa():
    import pyarrow as pa  # noqa: PLC0415 - heavy, and only releases need it
    import pyarrow.parquet as pq  # noqa: PLC0415

    return pa, pq


def release_snapshot() -> RatingSnapshot:
    snapshot = publication_selectors.release_snapshot_latest()
    if snapshot is None:
        raise ArenaError("No rating snapshot yet: a release is cut at a snapshot (run a refit first).", status=409)
    return snapshot


def _conversation(turns: list[dict], side: str) -> list[dict]:
    out = []
    for turn in turns:
        out += [{"role": "user", "content": turn["prompt"]}, {"role": "assistant", "content": turn[f"answer_{side}"]}]
    return out


def _battles_table(snapshot: RatingSnapshot):
    pa, _ = _pa()
    published = publication_selectors.battles_published(delay_s=int(settings.ARENA_PUBLISH_DELAY_S)).filter(
        vote__created_at__lte=snapshot.last_vote_at
    )
    rows: dict[str, list] = {name: [] for name in (
        "question_id", "model_a", "model_b", "winner", "tstamp", "turn", "language", "anony", "counted",
        "conversation_a", "conversation_b", "redaction_version", "moderation_score",
    )}  # fmt: skip
    for battle in published.order_by("vote__created_at", "id").iterator(chunk_size=BATTLE_BATCH):
        turns = [turn_public(t) for t in battle.turns.all()]
        vote = battle.vote
        rows["question_id"].append(battle.public_id.hex)
        rows["model_a"].append(public_name(battle.model_a))  # a withheld name is its stand-in
        rows["model_b"].append(public_name(battle.model_b))
        rows["winner"].append(vote.winner)
        rows["tstamp"].append(vote.created_at.timestamp())
        rows["turn"].append(vote.turn_count)
        rows["language"].append(vote.language)
        rows["anony"].append(True)
        rows["counted"].append(vote.counted)
        rows["conversation_a"].append(_conversation(turns, "a"))
        rows["conversation_b"].append(_conversation(turns, "b"))
        rows["redaction_version"].append(REDACTOR_VERSION)
        rows["moderation_score"].append((battle.moderation or {}).get("score"))
    message = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    schema = pa.schema([
        ("question_id", pa.string()), ("model_a", pa.string()), ("model_b", pa.string()), ("winner", pa.string()),
        ("tstamp", pa.float64()), ("turn", pa.int32()), ("language", pa.string()), ("anony", pa.bool_()),
        ("counted", pa.bool_()), ("conversation_a", message), ("conversation_b", message),
        ("redaction_version", pa.string()), ("moderation_score", pa.float64()),
    ])  # fmt: skip
    return pa.table(rows, schema=schema)


def _votes_tables(snapshot: RatingSnapshot):
    """The votes in batches of record dicts (the export's columns), then a table per batch."""
    pa, _ = _pa()
    batch: list[dict] = []
    for record in selectors.votes_for_export(until=snapshot.last_vote_at):
        record["anony"] = True
        batch.append({column: record[column] for column in selectors.EXPORT_COLUMNS})
        if len(batch) >= VOTE_BATCH:
            yield pa.Table.from_pylist(batch)
            batch = []
    if batch:
        yield pa.Table.from_pylist(batch)


def _ratings_rows(snapshot: RatingSnapshot) -> list[dict]:
    """Every method's and category's newest snapshot made no later than this one (the same refit)."""
    rows = []
    latest: dict[tuple[str, str], RatingSnapshot] = {}
    for snap in RatingSnapshot.objects.filter(created_at__lte=snapshot.created_at).order_by("created_at", "id"):
        latest[(snap.method, snap.category)] = snap
    described = descriptions()  # the board's rule: models not public have no published rating
    everyone = BoardFilters(retired=True)
    for (method, category), snap in sorted(latest.items()):
        for row in rows_public(snap.rows, described, everyone):
            rows.append({
                "method": method, "category": category, "snapshot_id": snap.pk, "model": row.get("model"),
                "rating": row.get("rating"), "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
                "rank": row.get("rank"), "rank_ub": row.get("rank_ub"), "battles": row.get("battles"),
            })  # fmt: skip
    return rows


def _held_back(snapshot: RatingSnapshot) -> dict:
    voted = Vote.objects.filter(created_at__lte=snapshot.last_vote_at).values("battle_id")
    holds = (
        BattleHold.objects.filter(battle_id__in=voted).values("reason", "status").annotate(n=Count("id")).order_by()
    )
    out = {f"{row['reason']}:{row['status']}": row["n"] for row in holds}
    out["not yet moderated"] = (
        publication_selectors.battles_voted().filter(vote__created_at__lte=snapshot.last_vote_at, moderation__isnull=True).count()
    )
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def release_build(*, out: Path | None = None) -> DataRelease:
    """Write a release at the newest overall Bradley-Terry snapshot into ``out`` (default
    ``ARENA_RELEASES_DIR``)/<version>; its row. A version already written is refused (409)."""
    _, pq = _pa()
    snapshot = release_snapshot()
    version = f"{snapshot.created_at:%Y-%m-%d}-s{snapshot.pk}"
    base = Path(out or settings.ARENA_RELEASES_DIR)
    target = base / version
    if target.exists() or DataRelease.objects.filter(version=version).exists():
        raise ArenaError(f"Release {version} exists already (one per snapshot).", status=409)
    base.mkdir(parents=True, exist_ok=True)
    work = base / f".{version}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    try:
        battles = _battles_table(snapshot)
        pq.write_table(battles, work / "data" / "battles.parquet", compression="zstd")
        votes = 0
        writer = None
        for table in _votes_tables(snapshot):
            if writer is None:
                writer = pq.ParquetWriter(work / "data" / "votes.parquet", table.schema, compression="zstd")
            writer.write_table(table)
            votes += table.num_rows
        if writer is None:
            raise ArenaError("The snapshot covers no counted vote: nothing to release.", status=409)
        writer.close()
        pa, _ = _pa()
        ratings = _ratings_rows(snapshot)
        pq.write_table(pa.Table.from_pylist(ratings), work / "data" / "ratings.parquet", compression="zstd")
        counts = {
            "battles": battles.num_rows, "votes": votes, "ratings_rows": len(ratings),
            "held_back": _held_back(snapshot),
            "first_vote_at": snapshot.first_vote_at.isoformat() if snapshot.first_vote_at else None,
            "last_vote_at": snapshot.last_vote_at.isoformat(),
        }  # fmt: skip
        (work / "README.md").write_text(_card(version, snapshot, counts), encoding="utf-8")
        names = ["README.md", "data/battles.parquet", "data/votes.parquet", "data/ratings.parquet"]
        files = [{"name": n, "bytes": (work / n).stat().st_size, "sha256": _sha256(work / n)} for n in names]
        (work / "SHA256SUMS").write_text("".join(f"{f['sha256']}  {f['name']}\n" for f in files), encoding="ascii")
        files.append({"name": "SHA256SUMS", "bytes": (work / "SHA256SUMS").stat().st_size,
                      "sha256": _sha256(work / "SHA256SUMS")})  # fmt: skip
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return DataRelease.objects.create(
        version=version, snapshot=snapshot, path=str(target), files=files, counts=counts
    )


def _card(version: str, snapshot: RatingSnapshot, counts: dict) -> str:
    held = counts["held_back"]
    held_lines = "\n".join(f"| {key} | {value} |" for key, value in sorted(held.items())) or "| (none) | 0 |"
    settings_json = json.dumps(settings_public(snapshot.settings, descriptions()), sort_keys=True)[:2000]
    rounds = snapshot.settings.get("rounds", 1000)
    seed = snapshot.settings.get("seed", 0)
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return f"""---
license: {LICENCE}
pretty_name: Podium arena battles {version}
language:
- multilingual
configs:
- config_name: battles
  data_files: data/battles.parquet
- config_name: votes
  data_files: data/votes.parquet
- config_name: ratings
  data_files: data/ratings.parquet
---

# Podium arena battles, release {version}

Crowd votes between two anonymous language models, with the conversations of the battles that were
published. Cut at rating snapshot {snapshot.pk} (overall, Bradley-Terry), made {snapshot.created_at.isoformat()};
this folder written {created}.

## Counts

| | |
|---|---|
| battles with conversations (`data/battles.parquet`) | {counts['battles']} |
| counted votes (`data/votes.parquet`) | {counts['votes']} |
| rating rows (`data/ratings.parquet`) | {counts['ratings_rows']} |
| votes from | {counts['first_vote_at']} |
| votes to | {counts['last_vote_at']} |

## Fields

- **battles**: `question_id` (the battle's public id), `model_a`, `model_b`, `winner` (`model_a`, `model_b`,
  `tie`, `tie (bothbad)`), `tstamp` (vote time, seconds since the epoch), `turn` (turns in the battle),
  `language`, `anony` (always true: names hidden until the vote), `counted` (false: kept but not rated,
  e.g. an answer revealed a model), `conversation_a`/`conversation_b` (lists of `{{role, content}}`,
  user and assistant alternating, **redacted**), `redaction_version`, `moderation_score`.
- **votes**: the columns of `/api/votes.csv`: `question_id, model_a, model_b, winner, tstamp, turn,
  language, anony, prompt_tokens`, and style counts `tokens_a/b, headers_a/b, list_items_a/b, bold_a/b`.
  No text. Every counted vote the snapshot covers, also those whose conversation is held back.
- **ratings**: `method` (bt, elo, style), `category`, `snapshot_id`, `model`, `rating`, `ci_low`, `ci_high`
  (95% bootstrap intervals), `rank`, `rank_ub`, `battles`. Only models shown publicly (retired ones
  included): a model tested but never shown has no rating row, though its votes are in **votes** and
  **battles** (the others' ratings were fitted with them), its name there a stand-in `withheld-<id>`
  where its owner asked to withhold it.

## Licence

{LICENCE.upper()} (Creative Commons Attribution 4.0). Voters agreed, before their first message, that
their prompts and the answers are published under it.

## Redaction

Every conversation passed through `{REDACTOR_VERSION}`: e-mail addresses, phone numbers, payment card
numbers (Luhn-checked), IBANs, IP addresses, URLs carrying credentials or tokens, API keys, tokens and
private keys are replaced by typed placeholders (`<EMAIL>`, `<PHONE>`, `<CARD>`, `<IBAN>`, `<IP>`, `<URL>`,
`<SECRET>`, `<PRIVATE_KEY>`). Person names are not redacted. Measured recall and precision on a planted
set: Podium's docs/privacy.md.

## What was held back, and why

Conversations of these battles are not in `battles` (their votes, without text, are in `votes`):
moderation tags (`{MODERATION_VERSION}`, offensive language) and voters' reports wait for staff
("held"), or staff kept them out ("kept"); battles voted too recently for the last moderation pass are
"not yet moderated". Battles whose vote is younger than the publication delay are not included either.

| reason:status | battles |
|---|---|
{held_lines}

## Reproducing the ratings

```
python -m evalcore rate data/votes.parquet --method bt --bootstrap {rounds} --seed {seed} --format json
```

gives the overall Bradley-Terry rows of `ratings` (snapshot {snapshot.pk}); `--method style` and
`--method elo --bootstrap N` the others. The snapshot's settings: `{settings_json}`.
"""
