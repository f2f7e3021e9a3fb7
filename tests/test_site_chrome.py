"""Item 9 of the README demo's issue: every page has an icon (no favicon 404), and the main navigation
leads to pages, not to the JSON health probe (kept in the footer, labelled as a machine endpoint)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db
PAGES = ("/", "/arena/", "/leaderboard/", "/leaderboard/arena/", "/leaderboard/judges/")


@pytest.mark.parametrize("url", PAGES)
def test_every_page_links_its_icon_and_keeps_health_out_of_the_navigation(client, url):
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    assert '<link rel="icon" href="/static/favicon.ico"' in html
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S).group(1)
    assert "healthz" not in nav and "Health" not in nav
    footer = re.search(r"<footer>(.*?)</footer>", html, re.S).group(1)
    assert 'href="/healthz"' in footer and "Machine endpoints" in footer and "JSON" in footer


def test_the_icons_are_served_and_favicon_ico_leads_to_them(client):
    for name, kind in (("favicon.svg", "image/svg+xml"), ("favicon.ico", "image/")):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and response["Content-Type"].startswith(kind), name
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert body[:4] == b"\x00\x00\x01\x00" if name.endswith(".ico") else b"<svg" in body
    response = client.get("/favicon.ico")  # what a browser asks for on pages without the link (admin, JSON)
    assert response.status_code == 302 and response["Location"] == "/static/favicon.ico"
    assert client.get("/favicon.ico", follow=True).status_code == 200


@pytest.mark.parametrize("url", ["/favicon.ico/x", "/favicon.ico%00", "/favicon.icox"])
def test_malformed_icon_addresses_are_plain_404s(client, url):
    assert client.get(url).status_code == 404
