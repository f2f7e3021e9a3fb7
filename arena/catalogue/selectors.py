"""Reads of the catalogue for the public: what each model is, which rows of a snapshot the public sees
(filters by organisation, licence and open weights; retired models on request; models not public never),
names withheld at their owner's request, the public record of retirements, and a model's rating history.

The board (:mod:`leaderboard.arena_board`) and the API (``/api/ratings/``, ``/api/models/``) both filter
through :func:`rows_public`, so the same query gets the same rows on the page and in the API.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from django.db.models import Q

from arena.models import Battle, LanguageModel
from arena.models.catalogue import stand_in
from arena.ratings.anchor import NOT_PUBLIC

DESCRIPTION_FIELDS = (
    "name", "organisation", "licence", "parameter_count", "open_weights", "knowledge_cutoff", "link",
    "public", "name_withheld", "retired_at", "retired_reason", "in_arena",
)  # fmt: skip
EXPORT_FIELDS = (
    "model", "organisation", "licence", "parameter_count", "open_weights", "knowledge_cutoff", "link",
    "retired_at", "retired_reason",
)  # fmt: skip


@dataclass(frozen=True)
class BoardFilters:
    """The board's (and /api/ratings/'s) catalogue filters; None: not filtered."""

    organisation: str | None = None
    licence: str | None = None
    open_weights: bool | None = None
    retired: bool = False  # show retired models too

    @classmethod
    def of(cls, values: dict) -> BoardFilters:
        """From validated query values (common.query rules): ``open_weights`` and ``retired`` are yes/no."""
        weights = values.get("open_weights") or None
        return cls(
            organisation=values.get("organisation") or None,
            licence=values.get("licence") or None,
            open_weights=None if weights is None else weights == "yes",
            retired=values.get("retired") == "yes",
        )

    @property
    def narrowing(self) -> bool:
        return self.organisation is not None or self.licence is not None or self.open_weights is not None


def parameters_label(count: int | None) -> str:
    """135000000 -> "135M", 1700000000 -> "1.7B"; "" when unknown."""
    if not count:
        return ""
    for size, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if count >= size:
            return f"{count / size:.3g}{suffix}"
    return str(count)


def descriptions(names=None) -> dict[str, dict]:
    """Catalogue models' descriptions by name: every model's, or with ``names`` (the models a snapshot
    rates) those and every model whose description can change what the public sees of any snapshot (in
    the arena, not public, withheld or retired): one query either way, but the catalogue's thousands of
    scored-only models (one per submission) are not read for each page."""
    rows = LanguageModel.objects.all()
    if names is not None:
        rows = rows.filter(Q(name__in=list(names)) | Q(in_arena=True) | Q(public=False) | Q(name_withheld=True) | Q(retired_at__isnull=False))
    found = {}
    for row in rows.values(*DESCRIPTION_FIELDS):
        row["parameters"] = parameters_label(row["parameter_count"])
        found[row["name"]] = row
    return found


def rated_names(rows) -> set[str]:
    """The models named by a snapshot's or live fit's rows (the ``names`` for :func:`descriptions`)."""
    return {r["model"] for r in rows or [] if isinstance(r, dict) and isinstance(r.get("model"), str)}


def withheld_names(described: dict[str, dict] | None = None) -> dict[str, str]:
    """Names whose owner asked to withhold them, each with the stand-in every public output uses."""
    if described is None:
        rows = LanguageModel.objects.filter(name_withheld=True).values_list("name", "pk")
    else:
        rows = [(name, None) for name, d in described.items() if d["name_withheld"]]
        ids = dict(LanguageModel.objects.filter(name__in=[n for n, _ in rows]).values_list("name", "pk"))
        rows = [(name, ids.get(name)) for name, _ in rows]
    return {name: stand_in(pk) for name, pk in rows}


def masked(value, names: dict[str, str]):
    """``value`` (JSON) with every string, and every key, equal to a withheld name replaced by its stand-in."""
    if not names:
        return value
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [masked(v, names) for v in value]
    if isinstance(value, dict):
        return {names.get(k, k): masked(v, names) for k, v in value.items()}
    return value


def rows_public(
    rows: list[dict], described: dict[str, dict], filters: BoardFilters = BoardFilters()
) -> list[dict]:
    """The rows of a snapshot the public sees under ``filters``, each with its model's description.

    Models not public are never shown (nor named in others' ``tied_with``); retired models only with
    ``filters.retired``. Ranks are among the rows shown (:func:`ranks_among`), as LMArena's, and a row's
    ``tied_with`` names only rows shown.
    """
    withheld = withheld_names(described) if any(d["name_withheld"] for d in described.values()) else {}
    never = {name for name, d in described.items() if not d["public"]}
    shown = []
    for row in rows:
        d = described.get(row["model"])
        if d is not None and not d["public"]:
            continue
        if d is not None and d["retired_at"] is not None and not filters.retired:
            continue
        if filters.narrowing and (
            d is None
            or (
                filters.organisation is not None
                and d["organisation"].casefold() != filters.organisation.casefold()
            )
            or (filters.licence is not None and d["licence"].casefold() != filters.licence.casefold())
            or (filters.open_weights is not None and d["open_weights"] != filters.open_weights)
        ):
            continue
        row = masked(_row_without(row, never), withheld)
        row["about"] = _about(d)
        shown.append(row)
    names = {row["model"] for row in shown}
    for row in shown:  # "tied with" names only rows on the page: not a retired model hidden, nor one filtered out
        if isinstance(row.get("tied_with"), list):
            row["tied_with"] = [name for name in row["tied_with"] if name in names]
    if shown and all("rank_ub" in row and "ci_low" in row for row in shown):  # a snapshot's rows (live ones have no ranks)
        ranks_among(shown, dropped=len(rows) - len(shown))
    return shown


def ranks_among(rows: list[dict], *, dropped: int = 0) -> None:
    """Re-rank ``rows`` (a snapshot's rows as shown, in place) among themselves, as LMArena ranks its
    table after hiding models (FastChat's ``recompute_final_ranking`` runs on the rows kept):
    ``rank_ub`` = 1 + the shown models whose interval lies wholly above this one (an open side, None,
    never does), ``rank`` = 1 + the shown models rated higher; provisional models count in neither and take
    no rank 1 while a rated model is shown (evalcore.ratings.provisional). ``tied_with_above`` is against
    the row above in that order. ``rank_ci`` (the fit's bootstrap rank interval over every fitted model)
    is widened to an outer bound among the shown when ``dropped`` fitted rows are not shown:
    [max(1, low - dropped), min(high, shown)], holding ``rank_ub`` and ``rank``."""
    rated = [r for r in rows if not r.get("provisional")] or rows
    floor = 2 if any(not r.get("provisional") for r in rows) else 1
    lows = sorted(r["ci_low"] for r in rated if r.get("ci_low") is not None and r["ci_low"] == r["ci_low"])  # not NaN
    ratings = sorted(r["rating"] for r in rated if r.get("rating") is not None and r["rating"] == r["rating"])
    for row in rows:
        high, rating = row.get("ci_high"), row.get("rating")
        above = 0 if high is None else len(lows) - bisect_right(lows, high)  # intervals wholly above
        better = 0 if rating is None else len(ratings) - bisect_right(ratings, rating)  # rated higher
        row["rank_ub"], row["rank"] = 1 + above, 1 + better
        if row.get("provisional"):
            row["rank_ub"], row["rank"] = max(row["rank_ub"], floor), max(row["rank"], floor)
        interval = row.get("rank_ci")
        if dropped and isinstance(interval, list) and len(interval) == 2:
            low = max(1, min(interval[0] - dropped, row["rank_ub"]))
            low = row["rank_ub"] if row.get("provisional") else low  # as evalcore bounds a provisional one
            row["rank_ci"] = [low, max(low, row["rank"], min(interval[1], len(rows)))]
    previous = None
    for row in sorted(rows, key=lambda r: (r["rank_ub"], -(r.get("rating") or 0.0))):
        if "tied_with_above" in row:
            row["tied_with_above"] = previous is not None and previous in (row.get("tied_with") or [])
        previous = row["model"]


def _row_without(row: dict, never: set[str]) -> dict:
    """A copy of ``row`` whose ``tied_with`` names none of ``never`` (not named beside the others either)."""
    row = dict(row)
    if never and isinstance(row.get("tied_with"), list):
        row["tied_with"] = [name for name in row["tied_with"] if name not in never]
    return row


MATRIX_KEYS = ("win_rate", "battles", "predicted")  # square, in the order of extra["models"]


def extra_public(extra: dict, described: dict[str, dict]) -> dict:
    """A snapshot's ``extra`` as the public may see it: the win matrices without the rows and columns of
    models not public, Elo's resumable state and the fit before voter exclusion without their ratings.

    One rule for every rating surface (board, figures, API, data release): a model not shown publicly has
    no published rating, win rate or battle count against others, neither under its name nor under a
    stand-in; the ratings of the others were fitted with its votes and are unchanged by leaving it out.
    Its votes stay in the vote exports (others' ratings are reproduced from them), a withheld name there
    as its stand-in (:func:`arena.models.catalogue.stand_in`).
    """
    never = _never(described)
    if not never or not isinstance(extra, dict):
        return extra
    out = dict(extra)
    if "notes" in extra:
        out["notes"] = notes_public(extra["notes"], described)
    models = extra.get("models")
    if isinstance(models, list):
        keep = [i for i, name in enumerate(models) if name not in never]
        out["models"] = [models[i] for i in keep]
        for key in MATRIX_KEYS:
            matrix = extra.get(key)
            if isinstance(matrix, list) and len(matrix) == len(models):
                out[key] = [[matrix[i][j] for j in keep] for i in keep]
            elif key in out:
                del out[key]  # not the shape expected: publish nothing rather than guess
    elo = extra.get("elo_state")
    if isinstance(elo, dict) and isinstance(elo.get("ratings"), dict):
        out["elo_state"] = {**elo, "ratings": {k: v for k, v in elo["ratings"].items() if k not in never}}
    before = extra.get("before_voter_exclusion")
    if isinstance(before, dict) and isinstance(before.get("rows"), list):
        rows = [_row_without(r, never) for r in before["rows"] if r.get("model") not in never]
        out["before_voter_exclusion"] = {**before, "rows": rows}
        if "notes" in before:
            out["before_voter_exclusion"]["notes"] = notes_public(before["notes"], described)
    return out


def _never(described: dict[str, dict]) -> set[str]:
    return {name for name, d in described.items() if not d["public"]}


def anchor_public(anchor, described: dict[str, dict]):
    """A snapshot's ``settings["anchor"]`` (or a rating point's) as the public may see it: a model not
    shown publicly (the anchor, the one it ``changed_from``, a ``refused`` one) is never named, not even by
    a stand-in: its ``model`` is None and ``not_public`` True, its rating kept (what the scale is)."""
    if not isinstance(anchor, dict):
        return anchor
    never = _never(described)
    out = dict(anchor)
    for key in ("changed_from", "refused"):
        if isinstance(out.get(key), dict):
            out[key] = anchor_public(out[key], described)
    if out.get("model") is not None and out["model"] in never:
        out["model"], out["not_public"] = None, True
    return out


def text_public(text: str, never: set[str]) -> str:
    """``text`` (a note) with every name in ``never`` replaced by "a model not shown publicly" (a whole
    name only: not inside a longer one)."""
    for name in sorted(never, key=len, reverse=True):
        if name and name in text:
            text = re.sub(rf"(?<![\w./:-]){re.escape(name)}(?![\w/:-]|\.\w)", NOT_PUBLIC, text)
    return text


def notes_public(notes, described: dict[str, dict]) -> list:
    """A snapshot's or live fit's notes with no model not shown publicly named (older notes may name an
    anchor hidden since)."""
    never = _never(described)
    if not isinstance(notes, list):
        return []
    return [text_public(n, never) if isinstance(n, str) and never else n for n in notes]


def settings_public(data: dict, described: dict[str, dict]) -> dict:
    """A snapshot's ``settings`` as the public may see them (the snapshot API, a release's card): the anchor
    through :func:`anchor_public` (and out of an older refit's fingerprint), withheld names as their
    stand-ins."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if "anchor" in data:
        data["anchor"] = anchor_public(data["anchor"], described)
    if isinstance(data.get("fingerprint"), str):  # an older refit's held the anchor's name
        data["fingerprint"] = text_public(data["fingerprint"], _never(described))
    return masked(data, withheld_names(described))


def snapshot_public(data: dict, described: dict[str, dict]) -> dict:
    """A snapshot's serialised ``rows``, ``extra`` and ``settings`` as the public may see them (the
    snapshot API): rows of models not public left out (and out of others' ``tied_with``; ranks among
    the rest, :func:`ranks_among`), the matrices and notes
    through :func:`extra_public`, the anchor through :func:`anchor_public`, every withheld name that is left replaced by its stand-in."""
    never = {name for name, d in described.items() if not d["public"]}
    data = dict(data)
    if isinstance(data.get("rows"), list):
        rows = [_row_without(r, never) for r in data["rows"] if r.get("model") not in never]
        if rows and all("rank_ub" in r and "ci_low" in r for r in rows):  # ranked as the board ranks them
            ranks_among(rows, dropped=len(data["rows"]) - len(rows))
        data["rows"] = rows
    if "extra" in data:
        data["extra"] = extra_public(data["extra"], described)
    if "settings" in data:
        data["settings"] = settings_public(data["settings"], described)
    return masked(data, withheld_names(described))


def _about(d: dict | None) -> dict:
    if d is None:
        return {key: None for key in EXPORT_FIELDS[1:]} | {"parameters": ""}
    return {
        "organisation": d["organisation"], "licence": d["licence"], "parameter_count": d["parameter_count"],
        "parameters": d["parameters"], "open_weights": d["open_weights"], "knowledge_cutoff": d["knowledge_cutoff"],
        "link": d["link"], "retired_at": d["retired_at"], "retired_reason": d["retired_reason"],
    }  # fmt: skip


def filter_choices(rows: list[dict], described: dict[str, dict]) -> dict[str, list[str]]:
    """The organisations and licences of the public models in ``rows`` (the board's drop-downs)."""
    public = [
        described[r["model"]] for r in rows if r["model"] in described and described[r["model"]]["public"]
    ]
    return {
        "organisations": sorted({d["organisation"] for d in public if d["organisation"]}, key=str.casefold),
        "licences": sorted({d["licence"] for d in public if d["licence"]}, key=str.casefold),
    }


def models_public() -> list[dict]:
    """The catalogue's arena models the public may see (``/api/models/``): every model shown on the
    board or retired from it, with its description; models not public are left out."""
    battled = set(Battle.objects.values_list("model_a__name", flat=True).distinct())
    battled |= set(Battle.objects.values_list("model_b__name", flat=True).distinct())
    out = []
    for name, d in sorted(descriptions().items()):
        if d["public"] and (d["in_arena"] or name in battled):
            out.append({"model": name, **{k: v for k, v in _about(d).items() if k != "parameters"}})
    return out
