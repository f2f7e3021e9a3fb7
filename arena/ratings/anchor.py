"""The scale's anchor: one reference model held at a fixed rating, so ratings do not all move when a model
joins (docs/arena-ratings.md, "The anchor").

A Bradley-Terry fit fixes only differences between models; evalcore centres the ratings on a mean of
1000, so a new strong model lowers everyone else's number by its share of the mean. LMArena instead pins
one model at a fixed score. With ``ARENA_ANCHOR_MODEL`` and ``ARENA_ANCHOR_RATING`` set, every rating of a
snapshot is put on the scale where the anchor model's rating is exactly ``ARENA_ANCHOR_RATING``:
Bradley-Terry and style fits hold it there in the point fit and in every bootstrap round (evalcore's
``anchor``, as FastChat anchors each bootstrap sample), so the anchor's interval has zero width and the
others' intervals are those of their difference to it; Elo and the live board's point ratings are
shifted by one constant (:func:`anchor_record`, :func:`rows_shifted`). Point differences, ranks' order,
win matrices and style coefficients are those of the centred fit.

Until the anchor model has a finite rating in a category (no votes there yet), that category keeps the
centring and its snapshot says so (``settings["anchor"]["applied"]`` False, and a note). Every snapshot
records the anchor it used; one whose anchor differs from the previous refit's says so
(``changed_from``) with a note, since numbers before and after are then on different scales.

An anchor the catalogue does not show publicly (``public`` off, withheld names included) is refused
(:func:`anchor_in_force`): held at a known rating, every public rating would be its distance to that
model, i.e. its rating would be published, which the catalogue's rule forbids under a name or a stand-in
(:func:`arena.catalogue.selectors.extra_public`). The refit then centres, records
``settings["anchor"]["refused"]`` (the name stays in the database; every public surface drops it,
:func:`arena.catalogue.selectors.anchor_public`), notes why without naming the model, and logs a warning;
the admin's page of the model says so too. Notes are written without a hidden model's name.
"""

from __future__ import annotations

import math

from django.conf import settings

from arena.models import LanguageModel

RATING_KEYS = ("rating", "ci_low", "ci_high")
CENTRE = 1000.0  # evalcore's centring: the mean rating (evalcore.ratings.BASE_RATING)
NOT_PUBLIC = "a model not shown publicly"  # how public text names a hidden anchor
REFUSED_REASON = "not shown publicly: held at a fixed rating, its rating would be published"


def anchor_configured() -> dict | None:
    """``{"model", "rating"}`` from the settings, or None when no anchor is set (centred ratings)."""
    model = (getattr(settings, "ARENA_ANCHOR_MODEL", "") or "").strip()
    if not model:
        return None
    return {"model": model, "rating": float(getattr(settings, "ARENA_ANCHOR_RATING", 1000.0))}


def anchor_in_force() -> tuple[dict | None, dict | None]:
    """``(anchor, refused)``: the configured anchor to fit with, or None with ``refused`` (``{"model",
    "rating", "reason"}``) when the catalogue has that model but does not show it publicly (one query)."""
    anchor = anchor_configured()
    if anchor is not None and LanguageModel.objects.filter(name=anchor["model"], public=False).exists():
        return None, {**anchor, "reason": REFUSED_REASON}
    return anchor, None


def anchor_refusal_message(model: LanguageModel) -> str | None:
    """What staff are told about ``model`` (the admin) when it is the configured anchor but not public."""
    anchor = anchor_configured()
    if anchor is None or anchor["model"] != model.name or model.public:
        return None
    return (
        f"The scale's anchor (ARENA_ANCHOR_MODEL), {model.name}, is not shown publicly: refits refuse it and "
        f"centre the ratings on a mean of 1000 instead, and the board says so (anchored at "
        f"{anchor['rating']:g}, its rating would be published). Set a public model as the anchor to keep an "
        "anchored scale."
    )


def hidden_names() -> frozenset[str]:
    """The catalogue's models not shown publicly (names a note must not carry)."""
    return frozenset(LanguageModel.objects.filter(public=False).values_list("name", flat=True))


def anchor_label(model: str | None, rating, hidden: frozenset[str] = frozenset()) -> str:
    """A note's label of an anchor: "beta at 1100"; a hidden model unnamed; "centred (no anchor)" without one."""
    if not model:
        return "centred (no anchor)"
    shown = NOT_PUBLIC if model in hidden else model
    return f"{shown} at {float(rating):g}" if isinstance(rating, int | float) else shown


def anchor_shift(rows: list[dict], anchor: dict | None) -> float | None:
    """The constant that puts the anchor model at its rating in ``rows``, or None when it has no finite
    rating there (or no anchor is set)."""
    if anchor is None:
        return None
    for row in rows:
        if row.get("model") == anchor["model"]:
            rating = row.get("rating")
            if isinstance(rating, int | float) and math.isfinite(rating):
                return anchor["rating"] - float(rating)
            return None
    return None


def rows_shifted(rows: list[dict], shift: float) -> list[dict]:
    """``rows`` with rating and interval bounds moved by ``shift`` (an open bound, None, stays open)."""
    out = []
    for row in rows:
        row = dict(row)
        for key in RATING_KEYS:
            if isinstance(row.get(key), int | float):
                row[key] = float(row[key]) + shift
        out.append(row)
    return out


def _same(a: dict | None, b: dict | None) -> bool:
    key = lambda x: None if not x or not x.get("model") else (x["model"], float(x.get("rating") or 0.0))  # noqa: E731
    return key(a) == key(b)


def anchor_record(
    rows: list[dict],
    anchor: dict | None,
    previous: dict | None,
    *,
    anchored_in_fit: bool = False,
    refused: dict | None = None,
    hidden: frozenset[str] = frozenset(),
) -> tuple[list[dict], dict, list[str]]:
    """``(rows, settings["anchor"], notes)`` for one snapshot: ``rows`` anchored where the anchor model has a
    rating, else as fitted (centred); ``previous`` is the last refit's ``settings["anchor"]`` (None: none).
    ``anchored_in_fit``: the fit itself held the anchor in every bootstrap round (Bradley-Terry and style),
    so the rows are kept; ``shift`` is then their mean less 1000 (what centring would have subtracted).
    ``refused``: the configured anchor, not used (:func:`anchor_in_force`; ``anchor`` is then None);
    ``hidden``: names the notes must not carry (:func:`hidden_names`)."""
    notes: list[str] = []
    shift = anchor_shift(rows, anchor)
    if anchor is None and refused is not None:
        record = {
            "model": None, "rating": None, "applied": False, "shift": 0.0,
            "refused": {"model": refused["model"], "rating": refused["rating"], "reason": refused["reason"]},
        }  # fmt: skip
        notes.append(refused_note(refused["rating"]))
    elif anchor is None:
        record = {"model": None, "rating": None, "applied": False, "shift": 0.0}
    elif anchored_in_fit:
        ratings = [
            r["rating"]
            for r in rows
            if isinstance(r.get("rating"), int | float) and math.isfinite(r["rating"])
        ]
        mean = sum(ratings) / len(ratings) if ratings else CENTRE
        record = {**anchor, "applied": True, "shift": mean - CENTRE, "intervals": "relative to the anchor"}
    else:
        record = {**anchor, "applied": shift is not None, "shift": shift or 0.0}
        if shift is None:
            notes.append(
                f"Ratings are centred on a mean of 1000, not anchored: the anchor model {anchor['model']} "
                f"has no rating here yet (no votes); from its first votes it is held at {anchor['rating']:g}."
            )
        else:
            rows = rows_shifted(rows, shift)
    if previous is not None and not _same(previous, record):
        record["changed_from"] = {"model": previous.get("model"), "rating": previous.get("rating")}
        was = anchor_label(previous.get("model"), previous.get("rating"), hidden)
        now = (
            "centred (no anchor)"
            if anchor is None
            else anchor_label(anchor["model"], anchor["rating"], hidden)
        )
        if refused is not None:
            now = "centred (the configured anchor is not shown publicly)"
        notes.append(
            f"The scale's anchor changed with this refit: was {was}, now {now}; earlier numbers are on the old scale."
        )
    return rows, record, notes


def refused_note(rating) -> str:
    """The public note of a snapshot whose configured anchor was refused (no name: it is not public)."""
    return (
        f"Ratings are centred on a mean of 1000, not anchored: the configured anchor is {NOT_PUBLIC}, and held "
        f"at {float(rating):g} it would publish that model's rating (every rating here would be its distance "
        "to it)."
    )
