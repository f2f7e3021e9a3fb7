"""The browsable API documentation: Swagger UI at /api/docs/, reading /api/schema/ and loading its scripts
and styles from the site's own static files (drf-spectacular-sidecar): nothing from another host, so it
works offline; linked from every page. No Redoc page: its bundle always loads a logo from cdn.redoc.ly
(tests/leaderboard/test_arena_category_status_browser.py checks the hosts asked)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def local_assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_the_docs_page_loads_everything_from_the_site(client):
    script = "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
    response = client.get("/api/docs/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "Podium API" in html and "/api/schema/" in html
    assert "https://" not in html and "http://" not in html  # no CDN, no web fonts: offline
    assets = local_assets(html)
    assert script in assets
    for asset in assets:
        assert asset.startswith("/static/"), asset
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert b"".join(served.streaming_content if served.streaming else [served.content]), asset


def test_the_schema_the_docs_read_is_served(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200 and "/api/ratings/" in response.json()["paths"]


@pytest.mark.parametrize("query", ["?x=%3Cscript%3Ealert(1)%3C/script%3E", "?lang=%00", "?url=http://evil.example/"])
def test_hostile_queries_are_not_reflected(client, query):
    response = client.get(f"/api/docs/{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>alert(1)" not in html and "evil.example" not in html


def test_other_methods_are_refused(client):
    assert client.post("/api/docs/").status_code == 405
    assert client.get("/api/redoc/").status_code == 404  # not served (see the module docstring)


def test_every_page_links_the_api_docs(client):
    html = client.get("/").content.decode()
    assert 'href="/api/docs/"' in html and 'href="/api/schema/"' in html and 'href="/arena/releases/"' in html
