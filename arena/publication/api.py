"""The public battles API: ``/api/battles/``, the published battles with their redacted turns.

Every query parameter is validated: an unknown parameter, a bad filter value, or a page size past
:data:`common.api_params.MAX_LIMIT` is a 400 that says what is allowed. Battles appear only once published: their vote is
covered by a rating snapshot created at least ``ARENA_PUBLISH_DELAY_S`` after it (prompts published at
once would let anyone replay them to a temperature-0 model and recognise it before voting; before the
vote they would reveal which models are playing). Voters see their own battle through the arena's views.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers

from arena.models import Battle, Vote
from arena.models.catalogue import public_name
from arena.publication import selectors
from arena.publication.redaction import turn_public
from common.api_params import StrictLimitOffsetPagination, validated_query
from common.public_ids import battle_id
from common.query import LanguageParam


class BattleFilters(serializers.Serializer):
    model = serializers.CharField(required=False, max_length=200)
    winner = serializers.ChoiceField(choices=Vote.Winner.values, required=False)
    language = LanguageParam(required=False, allow_blank=True)
    counted = serializers.BooleanField(required=False, allow_null=True, default=None)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)


class TurnSerializer(serializers.Serializer):
    """A published turn: prompt and answers with personal data and secrets replaced (arena/publication/redaction.py)."""

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
