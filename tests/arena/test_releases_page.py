"""/arena/releases/ says how releases are made (staff, on the page or with manage.py arena_release, at the
newest overall snapshot, after the publication delay) and whether one can be cut now, also before the
first; the live downloads are linked meanwhile."""

from __future__ import annotations

import pytest

from arena.models import RatingSnapshot
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db


def test_before_any_snapshot_the_page_says_how_a_release_is_made(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = 7200
    response = client.get("/arena/releases/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "No release yet" in html and "manage.py arena_release" in html
    assert "No release can be cut yet: there is no rating snapshot with a counted vote" in html
    assert "at least 2 hours old" in html and "ARENA_PUBLISH_DELAY_S" in html
    for href in ("/api/votes.csv", "/api/votes.jsonl", "/api/ratings/?format=csv", "/api/battles/"):
        assert f'href="{href}"' in html, href
    assert "release-new" not in html  # the button is for staff


def test_with_a_snapshot_the_page_names_the_one_a_release_would_take(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = 86400
    votes_create({"a": 0.3, "b": 0.0}, 12, seed=1)
    snapshots_refit(rounds=10)
    snapshot = RatingSnapshot.objects.get(method="bt", category="overall")
    html = client.get("/arena/releases/").content.decode()
    assert f"A release can be cut now at snapshot {snapshot.id}" in html and "12 counted votes" in html
    assert "at least 24 hours old" in html


@pytest.mark.parametrize("query", ["?queued=%3Cscript%3Ealert(1)%3C/script%3E", "?queued=1&queued=2", "?x=%00"])
def test_hostile_queries_change_nothing(client, query):
    response = client.get(f"/arena/releases/{query}")
    assert response.status_code == 200
    assert "<script>alert(1)" not in response.content.decode()
    assert client.post("/arena/releases/").status_code == 405
