"""Streamed file downloads that work under both WSGI and ASGI (the arena's and the leaderboard's exports)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse


async def _async_chunks(make: Callable[[], Iterator[bytes]]):
    """Pull a sync generator chunk by chunk on the request's DB thread (ASGI must not buffer it all)."""
    iterator = make()
    done = object()
    pull = sync_to_async(next, thread_sensitive=True)
    while (chunk := await pull(iterator, done)) is not done:
        yield chunk


def streaming_download(request, make: Callable[[], Iterator[bytes]], content_type: str, filename: str):
    """A no-store attachment streaming the chunks of ``make()``: lazily under WSGI, through the
    request's DB thread under ASGI."""
    content = _async_chunks(make) if isinstance(request, ASGIRequest) else make()
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response
