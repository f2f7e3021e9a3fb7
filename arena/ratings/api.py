"""The ratings API: ``/api/snapshots/``, ``/api/ratings/`` and ``/api/ratings/live/``.

Every query parameter is validated (:mod:`common.api_params`); rows, notes and matrices show the public only
the models it may see (:mod:`arena.catalogue.selectors`), as the board does.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from arena.catalogue import selectors as catalogue
from arena.models import LiveRating, RatingSnapshot
from arena.ratings import selectors
from common.api_params import StrictLimitOffsetPagination, validated_query
from common.query import CategoryParam, LicenceParam, OrganisationParam, YesNoParam


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
