"""Issue 31: an anchor the catalogue does not show publicly is never named publicly.

Set as the anchor, a model withheld at its owner's request or tested but never shown is refused by the
refit (arena.ratings.anchor.anchor_in_force): held at a known rating, every public rating would be its
distance to it, publishing its rating. The ratings are centred, the board and the snapshot say why
without naming it, the refit logs a warning and the model's admin page tells staff. An anchor hidden
after it was used (older snapshots, rating points, their notes) is shown as "a model not shown publicly"
with its rating. Every public surface is read by an anonymous visitor and by staff (the same public
output): the board, /api/ratings/ (scale, notes, live), /api/ratings/live/, /api/snapshots/<id>/ (settings,
notes), a public model's page (its rating history's scale) and a data release's card.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from arena.models import LanguageModel, LiveRating, RatingSnapshot
from arena.models.catalogue import stand_in
from arena.publication.releases import release_build
from arena.ratings import selectors as rating_selectors
from arena.ratings.anchor import NOT_PUBLIC
from arena.ratings.live import live_refit
from arena.ratings.refit import snapshots_refit
from arena.ratings.selectors import rating_history
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db

HIDDEN = "delta-anchor-x"  # the anchor: withheld, or never shown
STRENGTHS = {"alpha": 1.0, "beta": 0.2, "gamma": -0.3, HIDDEN: 0.5}
KINDS = ("withheld", "never_shown")


def hide(kind: str) -> str:
    """Hide the anchor model (``kind``); the strings a public surface must not carry."""
    withheld = kind == "withheld"
    LanguageModel.objects.filter(name=HIDDEN).update(
        public=False, name_withheld=withheld, organisation="Acme"
    )
    return stand_in(LanguageModel.objects.get(name=HIDDEN).pk)


def refit():
    snapshots_refit(rounds=10, seed=1, elo_orders=4, min_votes=1)
    live_refit()


def public_texts(client, tmp_path=None) -> dict[str, str]:
    """Every public surface where the scale's anchor can appear, as text, by what was read."""
    texts = {}
    for url in ("/leaderboard/arena/", "/leaderboard/arena/?method=style", "/leaderboard/arena/models/alpha/",
                "/leaderboard/arena/models/alpha/?method=style", "/api/ratings/", "/api/ratings/?method=style",
                "/api/ratings/?method=elo", "/api/ratings/live/"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        texts[url] = response.content.decode()
    for snapshot in RatingSnapshot.objects.all():
        url = f"/api/snapshots/{snapshot.pk}/"
        response = client.get(url)
        assert response.status_code == 200, url
        texts[url] = response.content.decode()
    return texts


def assert_unnamed(texts: dict[str, str], *names: str) -> None:
    for where, text in texts.items():
        for name in names:
            assert name not in text, (
                f"{name} named in {where}: ...{text[max(0, text.find(name) - 300) : text.find(name) + 100]}"
            )


@pytest.fixture
def votes(settings):
    settings.ARENA_PUBLISH_DELAY_S = 3600
    votes_create(STRENGTHS, 600, seed=4, start=timezone.now() - timedelta(days=2), with_turns=True)


@pytest.mark.parametrize("kind", KINDS)
def test_a_hidden_anchor_is_refused_the_ratings_centred_and_the_reason_given_unnamed(
    kind, votes, settings, client, admin_client, caplog, tmp_path
):
    secret_stand_in = hide(kind)
    settings.ARENA_ANCHOR_MODEL, settings.ARENA_ANCHOR_RATING = HIDDEN, 1100.0
    with caplog.at_level(logging.WARNING, logger="arena.ratings.refit"):
        refit()
    assert any(HIDDEN in r.getMessage() and "not shown publicly" in r.getMessage() for r in caplog.records)
    # Stored: refused, with its name for staff; centred as evalcore centres (mean 1000 over every fitted model).
    for method in ("bt", "style", "elo"):
        snapshot = rating_selectors.snapshot_latest(method)
        anchor = snapshot.settings["anchor"]
        assert anchor["model"] is None and anchor["applied"] is False and anchor["shift"] == 0.0, method
        assert anchor["refused"]["model"] == HIDDEN and anchor["refused"]["rating"] == 1100.0
        assert not any(HIDDEN in note for note in snapshot.extra["notes"]), method
    bt = rating_selectors.snapshot_latest("bt")
    assert np.mean([r["rating"] for r in bt.rows]) == pytest.approx(1000.0, abs=1e-4)
    live = LiveRating.objects.get(category="overall").rows
    assert np.mean([r["rating"] for r in live]) == pytest.approx(1000.0, abs=1e-4)  # the live board too
    # The same refusal again is no change of scale (no note of one, nothing recorded).
    snapshots_refit(rounds=10, seed=1, elo_orders=4, min_votes=1, force=True)
    assert "changed_from" not in rating_selectors.snapshot_latest("bt").settings["anchor"]
    for who in (client, admin_client):  # staff see the same public output
        texts = public_texts(who)
        assert_unnamed(texts, HIDDEN, secret_stand_in)
        board = texts["/leaderboard/arena/"]
        assert f"the configured anchor is {NOT_PUBLIC}, so it is not used (held at 1100" in board
        ratings = json.loads(texts["/api/ratings/"])
        assert ratings["scale"]["refused"] == {
            "model": None, "not_public": True, "rating": 1100.0, "reason": ratings["scale"]["refused"]["reason"]
        }  # fmt: skip
        assert any(f"the configured anchor is {NOT_PUBLIC}" in note for note in ratings["notes"])
        snapshot = json.loads(texts[f"/api/snapshots/{bt.pk}/"])
        assert snapshot["settings"]["anchor"]["refused"]["not_public"] is True
        assert "centred (mean 1000)" in texts["/leaderboard/arena/models/alpha/"]
    card = (tmp_path / release_build(out=tmp_path).version / "README.md").read_text()
    assert HIDDEN not in card and secret_stand_in not in card and '"not_public": true' in card
    # Staff are told why, on the model's admin page; the anonymous visitor is sent to log in.
    pk = LanguageModel.objects.get(name=HIDDEN).pk
    page = admin_client.get(f"/admin/arena/languagemodel/{pk}/change/").content.decode()
    assert (
        f"The scale&#x27;s anchor (ARENA_ANCHOR_MODEL), {HIDDEN}, is not shown publicly: refits refuse it"
        in page
    )
    assert client.get(f"/admin/arena/languagemodel/{pk}/change/").status_code == 302
    other = LanguageModel.objects.get(name="alpha").pk
    assert (
        "ARENA_ANCHOR_MODEL"
        not in admin_client.get(f"/admin/arena/languagemodel/{other}/change/").content.decode()
    )


@pytest.mark.parametrize("kind", KINDS)
def test_an_anchor_hidden_after_use_is_unnamed_on_the_old_scale_and_refused_at_the_next_refit(
    kind, votes, settings, client, admin_client
):
    refit()  # centred
    settings.ARENA_ANCHOR_MODEL, settings.ARENA_ANCHOR_RATING = HIDDEN, 1100.0
    refit()  # anchored while public: its name is in the stored settings, notes and rating points
    anchored = rating_selectors.snapshot_latest("bt")
    assert anchored.settings["anchor"]["model"] == HIDDEN and anchored.settings["anchor"]["applied"]
    assert any(HIDDEN in note for note in anchored.extra["notes"])
    alpha = next(r["rating"] for r in anchored.rows if r["model"] == "alpha")
    secret_stand_in = hide(kind)
    # Before the next refit: the old scale explained honestly, the model unnamed.
    for who in (client, admin_client):
        texts = public_texts(who)
        assert_unnamed(texts, HIDDEN, secret_stand_in)
        assert (
            f"Ratings are anchored to {NOT_PUBLIC}, held at 1100 (in every bootstrap round"
            in texts["/leaderboard/arena/"]
        )
        scale = json.loads(texts["/api/ratings/"])["scale"]
        assert scale["model"] is None and scale["not_public"] is True and scale["rating"] == 1100.0
        assert scale["applied"] is True
        snapshot = json.loads(texts[f"/api/snapshots/{anchored.pk}/"])
        assert snapshot["settings"]["anchor"]["not_public"] is True
        assert any(f"now {NOT_PUBLIC} at 1100" in note for note in snapshot["extra"]["notes"])
        page = texts["/leaderboard/arena/models/alpha/"]
        assert f"{NOT_PUBLIC} at 1100" in page and "The scale changed" in page
    assert rating_history("alpha")[-1]["anchor"] == {
        "model": None,
        "rating": 1100.0,
        "applied": True,
        "not_public": True,
    }
    # The next refit refuses it (the refusal is part of the fingerprint: no force needed) and says the
    # scale changed, still without the name.
    assert snapshots_refit(rounds=10, seed=1, elo_orders=4, min_votes=1)["skipped"] is False
    live_refit()
    refused = rating_selectors.snapshot_latest("bt")
    assert refused.settings["anchor"]["changed_from"] == {"model": HIDDEN, "rating": 1100.0}
    shift = next(r["rating"] for r in refused.rows if r["model"] == "alpha") - alpha
    assert abs(shift) > 1.0  # back on the centred scale
    for who in (client, admin_client):
        texts = public_texts(who)
        assert_unnamed(texts, HIDDEN, secret_stand_in)
        data = json.loads(texts[f"/api/snapshots/{refused.pk}/"])
        assert data["settings"]["anchor"]["changed_from"] == {
            "model": None,
            "rating": 1100.0,
            "not_public": True,
        }
        assert any(
            f"was {NOT_PUBLIC} at 1100, now centred (the configured anchor is not shown publicly)" in note
            for note in data["extra"]["notes"]
        )
        assert "not used (held at 1100" in texts["/leaderboard/arena/"]
        page = texts["/leaderboard/arena/models/alpha/"]
        assert f"was {NOT_PUBLIC} at 1100, now centred (mean 1000)" in page
