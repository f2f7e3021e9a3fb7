"""The ratings API: ``/api/snapshots/``, ``/api/ratings/`` (JSON, or CSV with ``?format=csv``) and
``/api/ratings/live/``.

Every query parameter is validated (:mod:`common.api_params`); rows, notes and matrices show the public only
the models it may see (:mod:`arena.catalogue.selectors`), as the board does.
"""

from __future__ import annotations

import io
import re

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from arena.catalogue import selectors as catalogue
from arena.models import LiveRating, RatingSnapshot
from arena.ratings import selectors
from common.api_params import StrictLimitOffsetPagination, validated_query
from common.query import CategoryParam, LicenceParam, OrganisationParam, YesNoParam
from evalcore.boundary import csvsafe


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
        (arena.catalogue.selectors.snapshot_public); withheld names are their stand-ins."""
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
        """Rows as the board shows them under the same filters (arena.catalogue.selectors.rows_public),
        each with ``about`` (organisation, licence, parameter count, open weights, cutoff, link, retirement)."""
        data = super().to_representation(instance)
        described, filters = self.context["catalogue"]
        data["rows"] = catalogue.rows_public(data["rows"], described, filters)
        data["scale"] = catalogue.anchor_public(instance.settings.get("anchor"), described)  # hidden: unnamed
        return catalogue.masked(data, catalogue.withheld_names(described))


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


RATINGS_CSV_COLUMNS = [
    "method", "category", "snapshot_id", "snapshot_created_at", "vote_count", "rank", "rank_ci_low",
    "rank_ci_high", "model", "rating", "ci_low", "ci_high", "battles", "provisional", "tied_with",
    "organisation", "licence", "parameter_count", "open_weights", "knowledge_cutoff", "retired_at",
    "retired_reason",
]  # fmt: skip


class RatingsCsvRenderer(BaseRenderer):
    """``?format=csv`` (or ``Accept: text/csv``) on ``/api/ratings/``: the view answers the CSV itself
    (:func:`ratings_csv`); an error body is JSON (:meth:`RatingsView.finalize_response`)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes | str) else JSONRenderer().render(data)


def _cell(value):
    """A CSV cell: empty for None (an open interval side, an unstated field), ISO dates, yes/no."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def ratings_csv(data: dict) -> str:
    """The ratings answer ``data`` (:class:`RatingsSerializer`'s, rows as the board shows them) as CSV: one
    row per model, best first, with the snapshot it comes from on every row; every cell through
    :mod:`evalcore.boundary.csvsafe` (a model name cannot become a spreadsheet formula)."""
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(RATINGS_CSV_COLUMNS)
    for row in data["rows"]:
        about = row.get("about") or {}
        rank_ci = row.get("rank_ci") or [None, None]
        values = {
            "method": data["method"], "category": data["category"], "snapshot_id": data["snapshot_id"],
            "snapshot_created_at": data["created_at"], "vote_count": data["vote_count"],
            "rank": row.get("rank_ub"), "rank_ci_low": rank_ci[0], "rank_ci_high": rank_ci[1],
            "model": row["model"], "rating": row.get("rating"), "ci_low": row.get("ci_low"),
            "ci_high": row.get("ci_high"), "battles": row.get("battles"), "provisional": bool(row.get("provisional")),
            "tied_with": "; ".join(row.get("tied_with") or []),
            **{k: about.get(k) for k in ("organisation", "licence", "parameter_count", "open_weights",
                                         "knowledge_cutoff", "retired_at", "retired_reason")},
        }  # fmt: skip
        writer.writerow([_cell(values[column]) for column in RATINGS_CSV_COLUMNS])
    return buffer.getvalue()


@extend_schema(
    parameters=[RatingsFilters],
    responses={(200, "application/json"): RatingsSerializer, (200, "text/csv"): OpenApiTypes.STR},
    description=(
        "JSON by default; `?format=csv` (or `Accept: text/csv`): one row per model, best first, columns "
        + ", ".join(RATINGS_CSV_COLUMNS) + " (`rank`: LMArena's conservative rank among the rows shown; an "
        "empty `ci_low`/`ci_high`: an open side of a provisional model's interval)."
    ),
)
class RatingsView(APIView):
    """The latest ratings for a method (bt, elo, style) and category (default: bt, overall), as JSON or
    CSV (``?format=csv``): the same rows and filters as the board."""

    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, RatingsCsvRenderer]

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
        data = RatingsSerializer(snapshot, context=context).data
        if request.accepted_renderer.format == "csv":
            name = re.sub(r"[^a-z0-9_-]+", "_", f"{params['method']}_{params['category']}".lower())
            response = HttpResponse(ratings_csv(data), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="podium_ratings_{name}.csv"'
            return response
        return Response(data)

    def finalize_response(self, request, response, *args, **kwargs):
        """An error asked for as CSV (a bad parameter, no snapshot) is answered as JSON, the API's errors."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response) and response.status_code >= 400 and getattr(
            response.accepted_renderer, "format", None
        ) == "csv":
            response.accepted_renderer, response.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return response
