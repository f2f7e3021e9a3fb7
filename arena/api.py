"""The arena's read API: voted battles, rating snapshots, latest ratings, and streamed vote exports.

Every query parameter is validated: an unknown parameter, a bad filter value, or a page size past
:data:`MAX_LIMIT` is a 400 that says what is allowed. Battles appear only once published: their vote is
covered by a rating snapshot created at least ``ARENA_PUBLISH_DELAY_S`` after it (prompts published at
once would let anyone replay them to a temperature-0 model and recognise it before voting; before the
vote they would reveal which models are playing). Voters see their own battle through the arena's views.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from django.conf import settings
from django.http import Http404, JsonResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from arena import exports, selectors
from arena import selectors_catalogue as catalogue
from arena.models import Battle, LiveRating, RatingSnapshot, Vote
from arena.models_catalogue import public_name
from arena.redaction import turn_public
from arena.selectors import EXPORT_COLUMNS
from common.api_params import validated_query
from common.public_ids import battle_id
from common.query import (
    CategoryParam,
    LanguageParam,
    LicenceParam,
    OrganisationParam,
    YesNoParam,
    whole_number,
)
from common.streaming import streaming_download

MAX_LIMIT = 1000
MAX_OFFSET = 10**9


def _int_param(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return whole_number(raw, low=low, high=high)  # ASCII digits only (common.query)
    except ValueError as exc:
        raise ValidationError({name: str(exc)}) from None


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """Limit/offset paging that refuses bad or oversized values instead of silently clamping them."""

    default_limit = 100
    max_limit = MAX_LIMIT

    def get_limit(self, request):
        return _int_param(request, "limit", self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return _int_param(request, "offset", 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view):
        """The documented parameters carry the bounds the server enforces."""
        bounds = {"limit": (1, self.max_limit), "offset": (0, MAX_OFFSET)}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
        return parameters


class BattleFilters(serializers.Serializer):
    model = serializers.CharField(required=False, max_length=200)
    winner = serializers.ChoiceField(choices=Vote.Winner.values, required=False)
    language = LanguageParam(required=False, allow_blank=True)
    counted = serializers.BooleanField(required=False, allow_null=True, default=None)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)


class SnapshotFilters(serializers.Serializer):
    method = serializers.ChoiceField(choices=RatingSnapshot.Method.values, required=False)
    category = CategoryParam(required=False)


class RatingsFilters(serializers.Serializer):
    method = serializers.ChoiceField(choices=RatingSnapshot.Method.values, default="bt")
    category = CategoryParam(default="overall")
    # The board's catalogue filters, by the same rules (common.query): the same rows as the page.
    organisation = OrganisationParam(required=False)
    licence = LicenceParam(required=False)
    open_weights = YesNoParam(required=False)
    retired = YesNoParam(required=False, help_text="yes: include retired models (hidden by default, as on the board)")


class TurnSerializer(serializers.Serializer):
    """A published turn: prompt and answers with personal data and secrets replaced (arena/redaction.py)."""

    index = serializers.IntegerField()
    prompt = serializers.CharField()
    answer_a = serializers.CharField()
    answer_b = serializers.CharField()

    def to_representation(self, instance):
        return {"index": instance.index, **turn_public(instance)}


class BattleSerializer(serializers.ModelSerializer):
    public_id = serializers.SerializerMethodField(help_text="32 hex digits: votes.csv's question_id (docs/api.md, Ids)")
    model_a = serializers.SerializerMethodField()
    model_b = serializers.SerializerMethodField()
    winner = serializers.CharField(source="vote.winner")
    model_a_position = serializers.CharField(source="vote.model_a_position")
    turn_count = serializers.IntegerField(source="vote.turn_count")
    language = serializers.CharField(source="vote.language")
    prompt_tokens = serializers.IntegerField(source="vote.prompt_tokens")
    style_a = serializers.JSONField(source="vote.style_a")
    style_b = serializers.JSONField(source="vote.style_b")
    counted = serializers.BooleanField(source="vote.counted")
    excluded_reason = serializers.CharField(source="vote.excluded_reason")
    voted_at = serializers.DateTimeField(source="vote.created_at")
    turns = TurnSerializer(many=True)

    class Meta:
        model = Battle
        fields = [
            "public_id", "model_a", "model_b", "winner", "model_a_position", "turn_count", "language",
            "prompt_tokens", "style_a", "style_b", "counted", "excluded_reason", "created_at", "voted_at",
            "turns",
        ]  # fmt: skip
        read_only_fields = fields

    def get_public_id(self, obj) -> str:
        return battle_id(obj.public_id)

    def get_model_a(self, obj) -> str:
        return public_name(obj.model_a)  # a withheld name is its stand-in

    def get_model_b(self, obj) -> str:
        return public_name(obj.model_b)


class SnapshotSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = RatingSnapshot
        fields = ["id", "method", "category", "created_at", "vote_count", "first_vote_at", "last_vote_at"]
        read_only_fields = fields


class SnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = RatingSnapshot
        fields = SnapshotSummarySerializer.Meta.fields + ["settings", "rows", "extra"]
        read_only_fields = fields

    def to_representation(self, instance):
        """As stored, less the rows, matrix rows and columns and Elo state of models not shown publicly
        (arena.selectors_catalogue.snapshot_public); withheld names are their stand-ins."""
        data = super().to_representation(instance)
        return catalogue.snapshot_public(data, catalogue.descriptions(names=catalogue.rated_names(data.get("rows"))))


class LiveRatingsSerializer(serializers.ModelSerializer):
    class Meta:
        model = LiveRating
        fields = ["category", "fitted_at", "vote_count", "high_water", "base_refit_at", "fit_seconds", "rows", "notes"]
        read_only_fields = fields


class RatingsSerializer(serializers.ModelSerializer):
    snapshot_id = serializers.IntegerField(source="id")
    notes = serializers.SerializerMethodField()
    live = serializers.SerializerMethodField()

    class Meta:
        model = RatingSnapshot
        fields = [
            "snapshot_id", "method", "category", "created_at", "vote_count", "first_vote_at",
            "last_vote_at", "rows", "notes", "live",
        ]  # fmt: skip
        read_only_fields = fields

    def get_notes(self, obj) -> list[str]:
        return catalogue.notes_public(list(obj.extra.get("notes", [])), self.context["catalogue"][0])

    @extend_schema_field(LiveRatingsSerializer(allow_null=True))
    def get_live(self, obj) -> dict | None:
        """Bradley-Terry only: the category's live point ratings (newer than the snapshot's), or null."""
        live = selectors.live_rating(obj.category) if obj.method == "bt" else None
        if live is None:
            return None
        data = LiveRatingsSerializer(live).data
        data["rows"] = catalogue.rows_public(data["rows"], *self.context["catalogue"])
        data["notes"] = catalogue.notes_public(data["notes"], self.context["catalogue"][0])
        return data

    def to_representation(self, instance):
        """Rows as the board shows them under the same filters (arena.selectors_catalogue.rows_public),
        each with ``about`` (organisation, licence, parameter count, open weights, cutoff, link, retirement)."""
        data = super().to_representation(instance)
        described, filters = self.context["catalogue"]
        data["rows"] = catalogue.rows_public(data["rows"], described, filters)
        data["scale"] = catalogue.anchor_public(instance.settings.get("anchor"), described)  # hidden: unnamed
        return catalogue.masked(data, catalogue.withheld_names(described))


def _publish_delay() -> int:
    return int(getattr(settings, "ARENA_PUBLISH_DELAY_S", 86400))


@extend_schema(
    parameters=[BattleFilters],
    summary="Published battles, newest vote first",
    responses={
        200: BattleSerializer,
        400: OpenApiResponse(description="A bad parameter, or since later than until (the message names both)."),
    },
    description="A battle is published once a rating snapshot created at least ARENA_PUBLISH_DELAY_S "
    "(default one day) after its vote covers that vote.",
)
class BattleList(generics.ListAPIView):
    serializer_class = BattleSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        filters = validated_query(self.request, BattleFilters)
        return selectors.battles_published(delay_s=_publish_delay(), **filters)


@extend_schema(summary="One published battle with its turns")
class BattleDetail(generics.RetrieveAPIView):
    serializer_class = BattleSerializer

    def get_object(self):
        validated_query(self.request, serializers.Serializer, paged=False)
        battle = selectors.battle_published(self.kwargs["public_id"], delay_s=_publish_delay())
        if battle is None:
            raise Http404("no published battle with this id (battles are published a while after their vote)")
        return battle


@extend_schema(parameters=[SnapshotFilters], summary="Rating snapshots, newest first")
class SnapshotList(generics.ListAPIView):
    serializer_class = SnapshotSummarySerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        return selectors.snapshot_list(**validated_query(self.request, SnapshotFilters))


@extend_schema(summary="One rating snapshot with its rows, matrices and notes")
class SnapshotDetail(generics.RetrieveAPIView):
    serializer_class = SnapshotSerializer

    def get_object(self):
        validated_query(self.request, serializers.Serializer, paged=False)
        snapshot = selectors.snapshot_by_id(self.kwargs["pk"])
        if snapshot is None:
            raise Http404("no such snapshot")
        return snapshot


class LiveRatingsFilters(serializers.Serializer):
    category = CategoryParam(default="overall")


class LiveRatingsView(APIView):
    """The live Bradley-Terry point ratings of a category, refitted within a second of each vote
    (``fitted_at``: when; no intervals: those are the latest bootstrap snapshot's, ``/api/ratings/``)."""

    @extend_schema(parameters=[LiveRatingsFilters], responses=LiveRatingsSerializer)
    def get(self, request):
        params = validated_query(request, LiveRatingsFilters, paged=False)
        row = selectors.live_rating(params["category"])
        if row is None:
            raise Http404(f"no live ratings for category {params['category']!r} yet")
        data = LiveRatingsSerializer(row).data
        described = catalogue.descriptions(names=catalogue.rated_names(data["rows"]))  # not public: left out; withheld: masked
        data["rows"] = catalogue.rows_public(data["rows"], described, catalogue.BoardFilters(retired=True))
        data["notes"] = catalogue.notes_public(data["notes"], described)
        return Response(catalogue.masked(data, catalogue.withheld_names(described)))


class RatingsView(APIView):
    """The latest ratings for a method (bt, elo, style) and category (default: bt, overall)."""

    @extend_schema(parameters=[RatingsFilters], responses=RatingsSerializer)
    def get(self, request):
        params = validated_query(request, RatingsFilters, paged=False)
        snapshot = selectors.snapshot_latest(params["method"], params["category"])
        if snapshot is None:
            raise Http404(
                f"no {params['method']} snapshot for category {params['category']!r}; "
                f"categories with snapshots: {selectors.snapshot_categories()}"
            )
        described = catalogue.descriptions(names=catalogue.rated_names(snapshot.rows))
        context = {"catalogue": (described, catalogue.BoardFilters.of(params))}
        return Response(RatingsSerializer(snapshot, context=context).data)


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
