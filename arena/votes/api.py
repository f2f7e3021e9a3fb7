"""The vote downloads: ``/api/votes.csv`` and ``/api/votes.jsonl``, every counted vote in FastChat's battle
format, streamed (no parameters; one format each, whatever the client's Accept header says)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from django.http import JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.views import APIView

from arena.votes import exports
from arena.votes.selectors import EXPORT_COLUMNS
from common.streaming import streaming_download


def _stream(request, make: Callable[[], Iterator[bytes]], content_type: str, filename: str):
    if request.GET:
        return _bad_request(f"this export takes no parameters (got: {', '.join(sorted(request.GET))})")
    return streaming_download(request, make, content_type, filename)


def _bad_request(message: str):
    return JsonResponse({"detail": message}, status=400)


class IgnoreClientContentNegotiation(BaseContentNegotiation):
    """Exports have one format each, whatever the client's Accept header says."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class _PassthroughRenderer(BaseRenderer):
    """Bytes pass through (the streamed export); anything else (an error body) becomes JSON."""

    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes) else json.dumps(data).encode()


class CsvRenderer(_PassthroughRenderer):
    media_type = "text/csv"
    format = "csv"


class JsonLinesRenderer(_PassthroughRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class _VotesExport(APIView):
    content_negotiation_class = IgnoreClientContentNegotiation
    chunks: Callable[[], Iterator[bytes]]
    filename: str

    def get(self, request):
        media_type = self.renderer_classes[0].media_type
        return _stream(request._request, type(self).chunks, f"{media_type}; charset=utf-8", self.filename)


@extend_schema(
    summary="All counted votes, FastChat battle format, CSV (streamed)",
    description="Columns: " + ", ".join(EXPORT_COLUMNS) + ". Reads with `python -m evalcore rate`.",
    responses={(200, "text/csv"): OpenApiTypes.STR},
)
class VotesCsv(_VotesExport):
    renderer_classes = [CsvRenderer]
    chunks = staticmethod(exports.votes_csv_chunks)
    filename = "podium_votes.csv"


@extend_schema(
    summary="All counted votes, FastChat battle format, JSON Lines (streamed)",
    description="The CSV's keys plus FastChat's conv_metadata object per line.",
    responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
)
class VotesJsonLines(_VotesExport):
    renderer_classes = [JsonLinesRenderer]
    chunks = staticmethod(exports.votes_jsonl_chunks)
    filename = "podium_votes.jsonl"
