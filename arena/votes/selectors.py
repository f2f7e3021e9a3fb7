"""Reading votes: the counted votes as columns for the fit, and every vote for the downloads.

Battle reads for the battle flow live in :mod:`arena.play.selectors`, published battles in
:mod:`arena.publication.selectors`, rating snapshots in :mod:`arena.ratings.selectors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Q, Sum

from arena.models import LanguageModel, Vote
from arena.models.catalogue import stand_in
from arena.votes import columns as vote_columns
from evalcore.ratings.battles import OUTCOME_NAMES, encode_winners

# Vote.style_a / style_b keys, in the order of evalcore's STYLE_FEATURES. The vote service writes
# evalcore's names (markdown_style_counts); "lists" is accepted as another spelling of "list_items".
VOTE_STYLE_KEYS = ("tokens", "headers", "list_items", "bold")
EXPORT_STYLE_COLUMNS = ("tokens", "headers", "list_items", "bold")
EXPORT_COLUMNS = (
    "question_id", "model_a", "model_b", "winner", "tstamp", "turn", "language", "anony",
    "prompt_tokens",
    *(f"{name}_{side}" for name in EXPORT_STYLE_COLUMNS for side in ("a", "b")),
)  # fmt: skip
_CHUNK = 2000
# The numeric style columns the database derives from style_a / style_b (arena.models.StyleCount).
STYLE_COLUMNS = tuple(f"style_{side}_{key}" for side in ("a", "b") for key in VOTE_STYLE_KEYS)


@dataclass(frozen=True)
class VoteColumns:
    """Counted votes in vote-time order, one entry per vote (n votes), as numpy columns.

    Attributes
    ----------
    names : tuple of str
        Model names, sorted; ``a`` and ``b`` index into it.
    a, b : ndarray of int32, shape (n,)
        The two sides of each vote.
    outcome : ndarray of int8, shape (n,)
        evalcore's outcome codes (0 model_a won, 1 model_b won, 2 tie, 3 tie (both bad)).
    tstamp : ndarray of float64, shape (n,)
        Vote time, seconds since the epoch.
    turn_count, prompt_tokens : ndarray of int64, shape (n,)
    language : ndarray of str (object), shape (n,), or None
        Each vote's language; None when ``language_code`` says it (the PostgreSQL reader: an object
        array of 10M strings costs seconds to make and to subset).
    language_code, languages : ndarray of int, shape (n,), and tuple of str, or None and ()
        The languages as codes into ``languages`` (sorted; it may name languages no vote here has), when
        the reader made them.
    style_a, style_b : ndarray of float64, shape (n, 4)
        tokens, headers, list items, bold spans of each side's answers.
    first_vote_at, last_vote_at : datetime or None
    prompt_code, session_code, ip_code : ndarray of int64, shape (n,), or None
        Codes of the prompt hash (-1: no prompt known) and, when asked for (``voters=True``), of the
        voter's session and IP hashes; ``session_hashes[code]`` / ``ip_hashes[code]`` give them back.
    vote_id : ndarray of int64, shape (n,), or None
        Each vote's id (the tagged categories' masks are made from it: :mod:`arena.categories.selectors`).
    """

    names: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    tstamp: np.ndarray
    turn_count: np.ndarray
    prompt_tokens: np.ndarray
    language: np.ndarray
    style_a: np.ndarray
    style_b: np.ndarray
    first_vote_at: datetime | None
    last_vote_at: datetime | None
    prompt_code: np.ndarray | None = None
    session_code: np.ndarray | None = None
    ip_code: np.ndarray | None = None
    session_hashes: tuple[str, ...] = ()
    ip_hashes: tuple[str, ...] = ()
    language_code: np.ndarray | None = None
    languages: tuple[str, ...] = ()
    vote_id: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.outcome.shape[0])

    def language_masks(self) -> dict[str, np.ndarray]:
        """A mask (bool, shape (n,)) per language that has votes, the empty language left out. From
        ``language_code`` when the reader gave it (comparing 10M Python strings once per language costs
        seconds, comparing codes milliseconds), else from codes made here."""
        if self.language_code is not None:
            return language_masks(self.language_code, self.languages)
        names, codes = np.unique(self.language.astype(str), return_inverse=True)
        return language_masks(codes.reshape(-1), tuple(str(name) for name in names))

    @property
    def model_a(self) -> np.ndarray:
        return np.asarray(self.names, dtype=object)[self.a] if self.names else np.empty(0, dtype=object)

    @property
    def model_b(self) -> np.ndarray:
        return np.asarray(self.names, dtype=object)[self.b] if self.names else np.empty(0, dtype=object)

    @property
    def winner(self) -> np.ndarray:
        return np.asarray(OUTCOME_NAMES, dtype=object)[self.outcome]


def language_masks(codes: np.ndarray, languages) -> dict[str, np.ndarray]:
    """Votes' languages given as codes into ``languages``: a mask per language that has votes, the
    empty language left out."""
    present = np.bincount(codes, minlength=len(languages)) > 0 if len(codes) else np.zeros(len(languages), bool)
    return {lang: codes == k for k, lang in enumerate(languages) if lang and present[k]}


def votes_counted_fingerprint() -> str:
    """A cheap summary that changes whenever the set of counted votes changes."""
    agg = Vote.objects.filter(counted=True).aggregate(n=Count("id"), top=Max("id"), total=Sum("id"))
    return f"{agg['n']}:{agg['top'] or 0}:{agg['total'] or 0}"


def _names_table() -> tuple[tuple[str, ...], dict[int, int]]:
    """Every model's name, sorted, and each model id's position in that order."""
    by_id = dict(LanguageModel.objects.values_list("id", "name"))
    names = tuple(sorted(by_id.values()))
    position = {name: k for k, name in enumerate(names)}
    return names, {model_id: position[name] for model_id, name in by_id.items()}


def votes_counted_columns(*, also_excluded: tuple[str, ...] = (), voters: bool = False) -> VoteColumns:
    """Every counted vote, ordered by (created_at, id), as columns; ``also_excluded`` adds the votes left
    out for those reasons (``excluded_reason``); ``voters`` adds the voters' session and IP codes.

    On PostgreSQL the columns come packed in binary, a chunk of ids per query, straight into numpy (10M
    votes in seconds: :mod:`arena.votes.columns`); elsewhere (SQLite) through the ORM, streamed.
    """
    names, code_of = _names_table()
    if connection.vendor == "postgresql":
        columns = vote_columns.read_postgresql(
            connection, code_of, also_excluded=also_excluded, voters=voters,
            cache_dir=getattr(settings, "ARENA_REFIT_CACHE_DIR", None),
        )  # fmt: skip
    else:
        columns = _read_orm(code_of, also_excluded=also_excluded, voters=voters)
    tstamp = columns["tstamp"]
    first = datetime.fromtimestamp(float(tstamp[0]), UTC) if len(tstamp) else None
    last = datetime.fromtimestamp(float(tstamp[-1]), UTC) if len(tstamp) else None
    return VoteColumns(names=names, first_vote_at=first, last_vote_at=last, **columns)


def _read_orm(code_of: dict[int, int], *, also_excluded: tuple[str, ...] = (), voters: bool = False) -> dict:
    wanted = Q(counted=True) | Q(excluded_reason__in=also_excluded) if also_excluded else Q(counted=True)
    rows = (
        Vote.objects.filter(wanted)
        .order_by("created_at", "id")
        .values_list(
            "model_a_id",
            "model_b_id",
            "winner",
            "created_at",
            "turn_count",
            "prompt_tokens",
            "language",
            "prompt_hash",
            "session_hash",
            "ip_hash",
            "id",
            *STYLE_COLUMNS,
        )  # fmt: skip
        .iterator(chunk_size=_CHUNK)
    )
    a, b, winner, tstamp, turns, tokens, language, style_a, style_b, vote_id = ([] for _ in range(10))
    prompt_code, session_code, ip_code = [], [], []
    prompts: dict[str, int] = {"": -1}
    sessions: dict[str, int] = {}
    ips: dict[str, int] = {}
    for model_a, model_b, w, created, turn_count, prompt_tokens, lang, ph, sh, ih, pk, *style in rows:
        vote_id.append(pk)
        a.append(code_of[model_a])
        b.append(code_of[model_b])
        winner.append(w)
        tstamp.append(created.timestamp())
        turns.append(turn_count)
        tokens.append(prompt_tokens)
        language.append(lang or "")
        style_a.append(style[:4])
        style_b.append(style[4:])
        prompt_code.append(prompts.setdefault(ph or "", len(prompts) - 1))
        session_code.append(sessions.setdefault(sh, len(sessions)))
        ip_code.append(ips.setdefault(ih, len(ips)))
    columns = {
        "a": np.asarray(a, dtype=np.int32),
        "b": np.asarray(b, dtype=np.int32),
        "outcome": encode_winners(winner) if winner else np.empty(0, dtype=np.int8),
        "tstamp": np.asarray(tstamp, dtype=np.float64),
        "turn_count": np.asarray(turns, dtype=np.int64),
        "prompt_tokens": np.asarray(tokens, dtype=np.int64),
        "language": np.asarray(language, dtype=object),
        "style_a": np.asarray(style_a, dtype=np.float64).reshape(-1, 4),
        "style_b": np.asarray(style_b, dtype=np.float64).reshape(-1, 4),
        "prompt_code": np.asarray(prompt_code, dtype=np.int64),
        "vote_id": np.asarray(vote_id, dtype=np.int64),
    }
    if voters:
        columns.update(
            session_code=np.asarray(session_code, dtype=np.int64), ip_code=np.asarray(ip_code, dtype=np.int64),
            session_hashes=tuple(sessions), ip_hashes=tuple(ips),
        )  # fmt: skip
    return columns


def votes_for_export(*, until: datetime | None = None) -> Iterator[dict]:
    """Counted votes, oldest first, as FastChat battle records with flat style columns.

    Keys are :data:`EXPORT_COLUMNS`: ``model_a, model_b, winner, tstamp, turn, language, anony`` as in
    FastChat's ``clean_battle`` output, and the style counts as ``tokens_a, tokens_b, headers_a, ...,
    list_items_a, ..., bold_a, bold_b`` (the columns ``python -m evalcore rate --method style`` reads).
    Streams from a server-side cursor: never the whole table in memory.
    """
    names = {  # a withheld name is its stand-in, as in every public output
        pk: stand_in(pk) if withheld else name
        for pk, name, withheld in LanguageModel.objects.values_list("id", "name", "name_withheld")
    }
    counted = Vote.objects.filter(counted=True)
    if until is not None:  # a data release: the votes its snapshot covers
        counted = counted.filter(created_at__lte=until)
    rows = (
        counted.order_by("created_at", "id")
        .values_list(
            "battle__public_id",
            "model_a_id",
            "model_b_id",
            "winner",
            "created_at",
            "turn_count",
            "language",
            "prompt_tokens",
            *STYLE_COLUMNS,
        )  # fmt: skip
        .iterator(chunk_size=_CHUNK)
    )
    for public_id, a, b, winner, created, turns, language, prompt_tokens, *style in rows:
        record = {
            "question_id": public_id.hex,
            "model_a": names[a],
            "model_b": names[b],
            "winner": winner,
            "tstamp": created.timestamp(),
            "turn": turns,
            "language": language or "",
            "anony": True,
            "prompt_tokens": prompt_tokens,
        }
        style_a, style_b = style[:4], style[4:]
        for k, column in enumerate(EXPORT_STYLE_COLUMNS):
            record[f"{column}_a"] = int(style_a[k])
            record[f"{column}_b"] = int(style_b[k])
        yield record
