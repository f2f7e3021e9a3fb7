"""One answer for the same query everywhere: ASCII digits only in limit/offset, language codes in any
case, an inverted since/until range is a 400 naming both values, a trailing space in a category is
trimmed by the API and the arena board alike."""

from __future__ import annotations

import html

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
    from arena.publication.holds import battles_moderate
    from arena.ratings.refit import snapshots_refit

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


# Every list endpoint and page, API and HTML, by the parameters it takes (common/query.py is the parser).
PAGED = ["/api/battles/", "/api/snapshots/", "/api/submissions/", "/api/scores/", "/api/runs/", "/api/judges/"]
PAGES = ["/leaderboard/"]  # and the samples and judgments pages (tests/leaderboard), which need a run
CATEGORY = ["/api/ratings/", "/api/ratings/live/", "/api/snapshots/", "/leaderboard/arena/"]
EVERY = PAGED + PAGES + CATEGORY + ["/leaderboard/compare/?a=" + "A" * 22 + "&b=" + "B" * 22 + "&task=gsm8k"]


def text(response) -> str:
    return html.unescape(response.content.decode())


def get(client, path: str, **params):
    joiner = "&" if "?" in path else "?"
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return client.get(path + (joiner + extra if extra else ""))


@pytest.mark.parametrize("path", PAGED)
def test_every_api_list_takes_the_same_paging(client, path):
    assert get(client, path, limit="5").status_code == 200
    for value in ("%D9%A1", "%205", "-1", "abc"):  # "١", " 5"
        assert get(client, path, limit=value).status_code == 400, (path, value)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_takes_the_same_page_numbers(client, path):
    assert get(client, path, page="1").status_code == 200
    for value in ("%D9%A1", "%201", "0", "abc", "1e2"):  # Django's IntegerField read "١" and " 1" as 1
        assert get(client, path, page=value).status_code == 400, (path, value)


@pytest.mark.parametrize("path", CATEGORY)
def test_every_category_parameter_is_read_alike(client, path):
    trimmed, plain = get(client, path, category="overall%20"), get(client, path, category="overall")
    assert trimmed.status_code == plain.status_code != 400, path
    for value in ("Overall", "overall%3B--", "language:" + "x" * 17, "%D9%A1", "overall%0Aevil"):
        response = get(client, path, category=value)
        assert response.status_code == 400, (path, value)


@pytest.mark.parametrize("path", EVERY)
def test_unknown_and_repeated_names_are_refused_everywhere_with_the_same_words(client, path):
    unknown = get(client, path, evil="1")
    assert unknown.status_code == 400 and "unknown parameter 'evil' (allowed: " in text(unknown), path
    name = "category" if path in CATEGORY else "a" if "compare" in path else "limit" if path in PAGED else "page"
    first = "overall" if name == "category" else "A" * 22 if name == "a" else "1"
    repeated = client.get(path + ("&" if "?" in path else "?") + f"{name}={first}&{name}={first}")
    assert repeated.status_code == 400 and f"parameter {name!r} given more than once" in text(repeated), path
