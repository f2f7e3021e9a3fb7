"""/healthz against the suite's PostgreSQL, and the pages that exist."""

import re
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from common.urls import redact


@pytest.mark.django_db
def test_healthz_reports_postgresql_and_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"], "a health probe must never be answered from a cache"
    body = response.json()
    assert body["status"] == "ok" and body["failing"] == []
    assert body["database"] == {"ok": True, "vendor": "postgresql"}, "the suite must run against PostgreSQL"
    broker = body["broker"]
    assert broker["ok"] is True
    assert broker["transport"] == urlsplit(settings.CELERY_BROKER_URL).scheme
    assert broker["url"] == redact(settings.CELERY_BROKER_URL)  # never with a password in it


@pytest.mark.django_db
def test_healthz_refuses_post(client):
    assert client.post("/healthz").status_code == 405


def title_and_heading(html: str) -> tuple[str, str]:
    title = re.search(r"<title>(.*?)</title>", html, re.S)
    heading = re.search(r"<h1[^>]*>(.*?)</h1>", html, re.S)
    return (title.group(1).strip() if title else ""), (heading.group(1).strip() if heading else "")


@pytest.mark.django_db
def test_home_links_to_every_section(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert title_and_heading(html) == ("Podium", "Podium")
    for href in ("/arena/", "/leaderboard/", "/leaderboard/arena/", "/leaderboard/submit/"):
        assert f'href="{href}"' in html, href


@pytest.mark.django_db
def test_arena_page_has_the_prompt_form_and_sets_the_csrf_cookie(client):
    response = client.get("/arena/")
    assert response.status_code == 200
    html = response.content.decode()
    assert title_and_heading(html) == ("Arena · Podium", "Arena")
    assert '<form id="prompt-form"' in html and 'id="prompt"' in html and 'id="send"' in html
    assert "csrftoken" in response.cookies, "the page's script posts with the CSRF cookie"


@pytest.mark.django_db
def test_leaderboard_page_renders_the_board_controls(client):
    response = client.get("/leaderboard/")
    assert response.status_code == 200
    html = response.content.decode()
    assert title_and_heading(html) == ("Leaderboard · Podium", "Leaderboard")
    assert '<form class="board-controls" method="get" action="/leaderboard/">' in html


@pytest.mark.django_db
def test_admin_login_page_is_a_login_form(client):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<form action="/admin/login/" method="post" id="login-form">' in html
    assert 'id="id_username"' in html and 'id="id_password"' in html
    assert client.get("/admin/").status_code == 302  # the admin itself needs a login
