"""The step every voter takes before a first message: agreeing to the arena's current terms."""

from __future__ import annotations

from django.conf import settings


def agree(client, **kwargs):
    """POST /arena/consent/ with the current terms version, as the arena page's "I agree" button does.

    ``client``: Django's test client, a live-server browser (tests/faults/conftest.py) or an httpx
    client (``kwargs``: its CSRF headers)."""
    response = client.post("/arena/consent/", data={"version": settings.ARENA_TERMS_VERSION}, **kwargs)
    assert response.status_code == 201, getattr(response, "text", None) or response.content
    return response
