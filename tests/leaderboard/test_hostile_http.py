"""Hostile requests found by a pass over the running site: each answers a clear 4xx, never a 500 or an
HTML page where JSON belongs.

- a JSON body nested 10,000 deep (RecursionError, HTTP 500 before);
- a 20-digit model id in a judge page's URL (OverflowError in SQLite, HTTP 500 before);
- ``?format=xml`` (a 404 "Not found." before, as if the object were missing);
- an ``/api/`` URL that matches no route with DEBUG on (Django's debug page listing every URL before);
- POST to a read-only page or export (the CSRF middleware's HTML 403 before) and HEAD (405 before);
- a refused CSRF check on the arena's JSON endpoints (an HTML page before);
- submission bodies with unknown fields, non-boolean booleans, or not an object (accepted or misreported
  before).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.leaderboard import tus_helpers as tus

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user(
        "hostile@example.org", "hostile@example.org", "pw-long-enough-42"
    )
    client.force_login(user)
    return user


@pytest.mark.parametrize("body", ['{"a":' * 10_000 + "1" + "}" * 10_000, "[" * 100_000 + "]" * 100_000])
def test_a_deeply_nested_json_body_is_a_400(client, owner, body):
    response = client.post("/api/submissions/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": "JSON parse error - the body is nested too deeply"}


@pytest.mark.parametrize("model_id", ["99999999999999999999", "9223372036854775808"])
def test_an_id_too_large_for_the_database_is_a_404(client, model_id):
    assert client.get(f"/leaderboard/judges/1/models/{model_id}/").status_code == 404
    assert client.get(f"/leaderboard/runs/{model_id}/").status_code == 404


@pytest.mark.parametrize(
    "url", ["/api/runs/?format=xml", "/api/ratings/?format=xml", "/api/judges/?format=yaml"]
)
def test_an_unknown_format_is_a_400_naming_the_formats_served(client, url):
    response = client.get(url)
    assert response.status_code == 400
    message = response.json()["format"][0]
    assert "is not served here; use one of:" in message and "json" in message


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    "url", ["/api/nonexistent/", "/api/runs/abc/", "/api/submissions/1x/", "/api/runs/-1/"]
)
def test_an_api_url_without_a_route_is_a_json_404_with_debug_on_or_off(client, settings, debug, url):
    settings.DEBUG = debug
    response = client.get(url)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f"no API endpoint or object at {url}"}


def test_an_api_url_without_its_slash_still_redirects(client):
    response = client.get("/api/runs?limit=5")
    assert response.status_code == 301 and response["Location"] == "/api/runs/?limit=5"


@pytest.mark.parametrize(
    "url", ["/leaderboard/scores.csv", "/leaderboard/", "/healthz", "/leaderboard/compare/"]
)
@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_a_read_only_page_answers_405_to_other_methods_even_without_a_csrf_token(url, method):
    strict = Client(enforce_csrf_checks=True)
    response = getattr(strict, method)(url)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("url", ["/leaderboard/scores.csv", "/leaderboard/"])
def test_head_is_answered_where_get_is(client, url):
    assert client.head(url).status_code == client.get(url).status_code == 200


def test_head_healthz_answers_as_get_does(client):
    assert client.head("/healthz").status_code == client.get("/healthz").status_code


def test_a_refused_csrf_check_on_the_arena_json_endpoints_is_json():
    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/arena/battles/", {"prompt": "hi"})
    assert response.status_code == 403 and response["Content-Type"] == "application/json"
    assert "CSRF check failed" in response.json()["error"]


@pytest.mark.parametrize(
    "fields, errors",
    [
        ({"apply_chat_template": "maybe"}, {"apply_chat_template": ["must be true or false, got 'maybe'"]}),
        ({"private": "yes"}, {"private": ["must be true or false, got 'yes'"]}),
        ({"private": 1}, {"private": ["must be true or false, got '1'"]}),
        ({"open_weights": "open"}, {"open_weights": ["must be true or false, got 'open'"]}),
        ({"owner": 1}, {"owner": ["unknown field; the fields are: model_name, model_type, base_model, licence, "
                                  "open_weights, precision, apply_chat_template, private, files, weight_sha256"]}),
        ({"status": "FINISHED"}, {"status": ["unknown field; the fields are: model_name, model_type, base_model, "
                                             "licence, open_weights, precision, apply_chat_template, private, files, weight_sha256"]}),
    ],
)  # fmt: skip
def test_a_submission_with_a_bad_boolean_or_an_unknown_field_is_refused(
    client, owner, fields, errors, tiny_dir
):
    response = tus.create_draft(client, tus.declared(tiny_dir), **fields)
    assert response.status_code == 400
    assert response.json() == errors


@pytest.mark.parametrize("body", ["[]", "null", '"text"', "3"])
def test_a_submission_body_that_is_not_an_object_gets_one_message(client, owner, body):
    response = client.post("/api/submissions/", body, content_type="application/json")
    assert response.status_code == 400
    assert list(response.json()) == ["non_field_errors"]
    assert response.json()["non_field_errors"][0].startswith("the body must be a JSON object")


def test_true_and_false_as_text_are_still_booleans(client, owner, tiny_dir):
    response = tus.create_draft(client, tus.declared(tiny_dir), private="true", apply_chat_template=False)
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "url", ["/api/ratings/?offset=abc", "/api/ratings/live/?limit=5", "/api/ratings/?limit=abc"]
)
def test_paging_parameters_are_refused_where_the_answer_is_not_a_page(client, url):
    # They were accepted with any value and ignored; the error for another unknown name listed them.
    response = client.get(url)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("unknown parameter ") and "allowed: " in detail
    allowed = detail.split("allowed: ")[1].split(")")[0].split(", ")
    assert "format" in allowed and "limit" not in allowed and "offset" not in allowed


def test_paging_parameters_still_page_the_lists(client):
    assert client.get("/api/runs/?limit=5&offset=0").status_code == 200
    assert client.get("/api/runs/?limit=abc").status_code == 400
