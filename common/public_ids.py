"""One public id per object, the same string in every URL, export, CSV column and API field
(docs/api.md, "Ids").

- A **battle** is its UUID written as 32 lowercase hex digits without dashes: the ``question_id`` of
  ``votes.csv`` and the data releases (FastChat's layout), ``public_id`` in the API, and the path of
  ``/arena/battles/<id>/``, ``/api/battles/<id>/`` and the WebSocket. The dashed form that earlier
  URLs used still works: a redirect (301 for reads, 308, which keeps the method and body, for writes)
  to the same URL with the canonical id; the WebSocket, which cannot redirect, takes both.
- A **submission** (and the upload draft it grew from, which shares it) is its 22-character public id:
  ``id`` in ``/api/submissions/``, ``submission`` in scores and runs, ``submission_id`` in the CSV and
  JSON exports, ``a``/``b`` of the compare page, and every page's path. A row number (the integer that
  earlier versions published) in a query or a staff path redirects to the public id where the viewer
  may see that submission.
- Everything else (runs, judges, snapshots, review items) has one id already: its row number.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import urlencode

from django.http import HttpResponsePermanentRedirect, HttpResponseRedirect
from django.urls import converters, register_converter, reverse
from django.views.decorators.csrf import csrf_exempt

SUBMISSION_ID = r"[A-Za-z0-9_-]{22}"
BATTLE_ID = r"[0-9a-f]{32}"
BATTLE_ID_DASHED = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ROW_ID = r"[0-9]{1,18}"

_SUBMISSION_RE = re.compile(rf"\A{SUBMISSION_ID}\Z")
_ROW_RE = re.compile(rf"\A{ROW_ID}\Z")


def battle_id(value: uuid.UUID | str) -> str:
    """A battle's public id: its UUID as 32 lowercase hex digits."""
    return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).hex


def is_submission_id(text: str) -> bool:
    return bool(_SUBMISSION_RE.match(text))


def is_row_id(text: str) -> bool:
    """A row number as earlier versions published it (1 to 18 ASCII digits)."""
    return bool(_ROW_RE.match(text))


class BattleIdConverter:
    """``<battleid:public_id>``: the canonical form; the view receives a UUID."""

    regex = BATTLE_ID

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(hex=value)

    def to_url(self, value) -> str:
        return battle_id(value)


class AnyBattleIdConverter(BattleIdConverter):
    """``<anybattleid:public_id>``: either form, for the WebSocket route (which cannot redirect)."""

    regex = f"(?:{BATTLE_ID}|{BATTLE_ID_DASHED})"

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)


class SubmissionIdConverter:
    """``<pubid:public_id>``: a submission's (or an upload's) 22 URL-safe characters."""

    regex = SUBMISSION_ID

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class RowIdConverter:
    """``<rowid:...>``: a database row id, 1 to 18 digits, so every value fits a 64-bit integer column.

    Django's ``int`` converter takes any length; a 20-digit id reached the database in a foreign-key
    lookup and raised OverflowError (HTTP 500) where it must be a plain 404.
    """

    regex = ROW_ID

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value) -> str:
        return str(int(value))


def moved(request, path: str, query: dict | None = None):
    """The permanent redirect from an earlier URL to ``path``: 301 for GET and HEAD, 308 otherwise
    (a client re-sends the same method and body), keeping the query string unless ``query`` replaces it."""
    if query is not None:
        qs = urlencode(query)
    else:
        qs = request.META.get("QUERY_STRING", "")
    target = f"{path}?{qs}" if qs else path
    if request.method in ("GET", "HEAD"):
        return HttpResponsePermanentRedirect(target)
    response = HttpResponseRedirect(target)
    response.status_code = 308
    return response


def legacy_route(url_name: str):
    """A view for an earlier URL that named the object by another id: it redirects (:func:`moved`) to
    ``url_name`` with the same keyword arguments, which the canonical converter writes in the public
    form. It checks nothing itself (the target does), so it needs no CSRF token."""
    @csrf_exempt
    def view(request, **kwargs):
        return moved(request, reverse(url_name, kwargs=kwargs))

    view.__name__ = f"legacy_{url_name.replace(':', '_').replace('-', '_')}"
    return view


def register_converters() -> None:
    """Register ``battleid``, ``anybattleid``, ``pubid`` and ``rowid`` once (URL tables call it)."""
    have = converters.get_converters()
    for name, converter in (("battleid", BattleIdConverter), ("anybattleid", AnyBattleIdConverter),
                            ("pubid", SubmissionIdConverter), ("rowid", RowIdConverter)):  # fmt: skip
        if name not in have:
            register_converter(converter, name)
