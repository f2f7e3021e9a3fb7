"""One answer for the same query everywhere: ASCII digits only in limit/offset, language codes in any
case, an inverted since/until range is a 400 naming both values, a trailing space in a category is
trimmed by the API and the arena board alike."""

from __future__ import annotations

import pytest

from tests.arena.vote_data import votes_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/battles/", "/api/snapshots/", "/api/submissions/"])
@pytest.mark.parametrize("value", ["١", "٣٠", " 5", "5 ", "+5", "1e2", "99999999999999999999"])
def test_limit_and_offset_take_ascii_digits_only(client, path, value):
    for name in ("limit", "offset"):
        response = client.get(path, {name: value})
        assert response.status_code == 400, (path, name, value)
        assert "digits 0-9" in str(response.json()) or "between" in str(response.json())


def test_language_codes_in_any_case_and_inverted_ranges(client, settings):
    settings.ARENA_PUBLISH_DELAY_S = 0
    votes_create({"a": 0.0, "b": 0.0}, 4, language="ja", with_turns=True)
    from arena.ratings import snapshots_refit
    from arena.services import battles_moderate

    battles_moderate()
    snapshots_refit(rounds=5, min_votes=1)
    assert client.get("/api/battles/", {"language": "JA"}).json()["count"] == 4
    assert client.get("/api/battles/", {"language": " ja "}).json()["count"] == 4
    inverted = client.get("/api/battles/", {"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
    assert inverted.status_code == 400
    detail = inverted.json()["detail"]
    assert "2026-02-01T00:00:00Z" in str(detail) and "2026-01-01T00:00:00Z" in str(detail)
    assert client.get("/api/ratings/", {"category": "overall "}).status_code == 200
    assert client.get("/leaderboard/arena/", {"category": "overall "}).status_code == 200
