"""/healthz against the suite's PostgreSQL, and the pages that exist."""

import pytest


@pytest.mark.django_db
def test_healthz_reports_postgresql_and_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    assert body["database"]["vendor"] == "postgresql", "the suite must run against PostgreSQL"
    assert body["broker"]["ok"] is True


@pytest.mark.django_db
def test_healthz_refuses_post(client):
    assert client.post("/healthz").status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/arena/", "/leaderboard/", "/admin/login/"])
def test_pages_render(client, url):
    response = client.get(url)
    assert response.status_code == 200
    assert b"Podium" in response.content or b"Django" in response.content
