"""``/api/models/`` and ``/api/models.csv``: the arena's models as the public sees them, with what each is
(organisation, licence, parameter count, open weights, knowledge cutoff, link) and its retirement.
Models tested in the arena but not shown publicly are left out (``/leaderboard/arena/retired/`` counts them)."""

from __future__ import annotations

import io

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from arena.catalogue.selectors import EXPORT_FIELDS, models_public
from common.api_params import validated_query
from evalcore.boundary import csvsafe


class ModelSerializer(serializers.Serializer):
    model = serializers.CharField()
    organisation = serializers.CharField()
    licence = serializers.CharField()
    parameter_count = serializers.IntegerField(allow_null=True)
    open_weights = serializers.BooleanField()
    knowledge_cutoff = serializers.CharField(help_text="YYYY, YYYY-MM or YYYY-MM-DD; empty when not stated")
    link = serializers.CharField()
    retired_at = serializers.DateTimeField(allow_null=True)
    retired_reason = serializers.CharField()


class ModelList(APIView):
    """Every arena model shown publicly (retired ones included, with date and reason)."""

    @extend_schema(responses=ModelSerializer(many=True), summary="Arena models and what they are")
    def get(self, request):
        validated_query(request, serializers.Serializer, paged=False)
        return Response(ModelSerializer(models_public(), many=True).data)


@extend_schema(summary="Arena models and what they are, CSV", responses={(200, "text/csv"): OpenApiTypes.STR})
class ModelCsv(APIView):
    def get(self, request):
        validated_query(request, serializers.Serializer, paged=False)
        buffer = io.StringIO()
        writer = csvsafe.writer(buffer, lineterminator="\n")
        writer.writerow(EXPORT_FIELDS)
        for row in models_public():
            when = row["retired_at"]
            row = {
                **row,
                "retired_at": when.isoformat() if when else "",
                "parameter_count": row["parameter_count"] or "",
            }
            row["open_weights"] = "yes" if row["open_weights"] else "no"
            writer.writerow([row[field] for field in EXPORT_FIELDS])
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="podium_arena_models.csv"'
        return response
