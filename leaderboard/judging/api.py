"""The judges' read API under ``/api/judges/``: configs, a judge's scores, audit and rank correlation
with the arena, and its judgments. Query parameters are validated like the rest of the API (unknown,
repeated or bad values are a 400 that says what is allowed); hidden models' judgments are left out."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers

from common.api_params import StrictLimitOffsetPagination, validated_query
from common.query import WholeNumberParam
from leaderboard.judging import selectors
from leaderboard.models import JudgeConfig, JudgeGrade, JudgePanel, Judgment


class JudgmentFilters(serializers.Serializer):
    model = WholeNumberParam(required=False, min_value=1, max_value=2**31 - 1,
                                     help_text="a catalogue model id: only its judgments")  # fmt: skip


class NoFilters(serializers.Serializer):
    pass


class JudgeConfigSerializer(serializers.ModelSerializer):
    baseline = serializers.CharField(source="baseline.name", allow_null=True, default=None,
                                     help_text="null for single-answer grading (no baseline)")  # fmt: skip
    judge_model = serializers.CharField(source="judge_model.name", allow_null=True, default=None)
    instructions = serializers.SerializerMethodField(help_text="how many questions (instructions) the judge uses")
    protocols = serializers.SerializerMethodField(
        help_text="every protocol the judge uses (a grading family's members: turn 1, turn 2, and the "
                  "reference-guided ones): role, name, sha256, source (whose wording: Podium's own, FastChat's "
                  "published prompt verbatim, or a FastChat-format prompt that is not FastChat's text) and "
                  "verdict_parse (podium or fastchat: how a generated verdict is read)")  # fmt: skip

    class Meta:
        model = JudgeConfig
        fields = ["id", "name", "kind", "judge_model", "judge_backend", "protocol_name", "protocol_sha256", "baseline",
                  "instructions", "questions_file", "reference_mode", "instructions_sha256", "max_new_tokens", "active",
                  "created_at", "protocols"]  # fmt: skip
        read_only_fields = fields

    def get_protocols(self, obj) -> list[dict]:
        return selectors.protocol_members(obj)

    def get_instructions(self, obj) -> int | None:
        if obj.kind == JudgeConfig.Kind.PAIRWISE:
            return len(obj.instructions)
        return selectors.question_count(obj)


class JudgeScoreSerializer(serializers.Serializer):
    model = serializers.CharField()
    model_id = serializers.IntegerField()
    run_id = serializers.IntegerField(allow_null=True, help_text="null for the baseline row")
    baseline = serializers.BooleanField(help_text="the baseline itself: 50% by construction")
    kind = serializers.CharField(required=False, help_text="pairwise, or single (value is a mean grade on 1-10)")
    value = serializers.FloatField(allow_null=True,
                                   help_text="LC win rate (percent), or the win rate when LC is not available; the mean "
                                             "grade for single-answer judges (null: every grade of that model failed)")  # fmt: skip
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    interval = serializers.CharField(
        allow_null=True, required=False,
        help_text="the method of value's 95% interval: delta-mid-p (LC: mid-p at the effective size "
                  "its delta-method error implies), mid-p or mid-p-effective (the win rate), bootstrap (a mean grade)",
    )  # fmt: skip
    lc = serializers.BooleanField(help_text="whether value is length-controlled")
    win_rate = serializers.FloatField(allow_null=True)
    win_rate_ci_low = serializers.FloatField(allow_null=True, required=False, help_text="the win rate's 95% mid-p interval")
    win_rate_ci_high = serializers.FloatField(allow_null=True, required=False)
    standard_error = serializers.FloatField(allow_null=True, help_text="the win rate interval's standard error "
                                            "((high - low) / 3.92); null where the interval is lopsided")  # fmt: skip
    lc_standard_error = serializers.FloatField(allow_null=True, help_text="the LC interval's standard error; null "
                                               "where the interval is lopsided")  # fmt: skip
    n = serializers.IntegerField(help_text="pairs (instructions) the figures rest on")
    bradley_terry = serializers.DictField(
        allow_null=True, help_text="Bradley-Terry rating over the judgments (rating, ci_low, ci_high: 95% bootstrap)"
    )
    bradley_terry_style = serializers.DictField(
        allow_null=True,
        help_text="style-controlled Bradley-Terry (answer length and markdown as covariates; rating, ci_low, "
        "ci_high); null when it could not be fitted or for runs stored before it was kept",
    )
    arena = serializers.DictField(allow_null=True)
    by_category = serializers.DictField(required=False, help_text="single-answer judges: the mean grade per category "
                                                                  "(mean, ci_low, ci_high, n)")  # fmt: skip
    by_turn = serializers.DictField(required=False, help_text="single-answer judges: the mean grade per turn")
    cost = serializers.DictField(required=False, allow_null=True, help_text="the run's cost per 1,000 judgments")


class JudgeDetailSerializer(serializers.Serializer):
    config = JudgeConfigSerializer()
    judge_key = serializers.CharField()
    scores = JudgeScoreSerializer(many=True, source="rows")
    correlation = serializers.DictField(help_text="Spearman's rho with arena ratings, bootstrap 95% interval")
    audit = serializers.SerializerMethodField(help_text="the newest audit")
    audits = serializers.SerializerMethodField(help_text="the latest audit on each human-labelled set")
    cost = serializers.DictField(allow_null=True, help_text="mean time and tokens per 1,000 judgments over its runs")
    panels = serializers.SerializerMethodField(help_text="the panels this judge sits on and its agreement with each")

    def get_audit(self, obj) -> dict | None:
        return _plain(obj["audit"])

    def get_audits(self, obj) -> list[dict]:
        return [_plain(a) for a in obj["audits"]]

    def get_panels(self, obj) -> list[dict]:
        return [{"id": p["panel"].pk, "name": p["panel"].name, "agreement": p["agreement"],
                 "most_disagreeing": p["most_disagreeing"]} for p in obj["panels"]]  # fmt: skip


def _plain(audit: dict | None) -> dict | None:
    if audit is None:
        return None
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in audit.items()}


class GradeSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="run.model.name")
    model_id = serializers.IntegerField(source="run.model_id")
    run = serializers.IntegerField(source="run_id")

    class Meta:
        model = JudgeGrade
        fields = ["id", "run", "model", "model_id", "idx", "question_id", "category", "turn", "score", "reference",
                  "raw", "prompt_sha256", "protocol_sha256", "ok", "error", "logprob"]  # fmt: skip
        read_only_fields = fields


class PanelSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")

    class Meta:
        model = JudgePanel
        fields = ["id", "name", "description", "members", "report", "refreshed_at"]
        read_only_fields = fields


class JudgmentSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="run.model.name")
    model_id = serializers.IntegerField(source="run.model_id")
    run = serializers.IntegerField(source="run_id")

    class Meta:
        model = Judgment
        fields = ["id", "run", "model", "model_id", "idx", "order", "p_first", "verdict", "winner", "weight", "raw",
                  "prompt_sha256", "ok", "error"]  # fmt: skip
        read_only_fields = fields


def _config(pk: int) -> JudgeConfig:
    config = selectors.judge_config_get(pk)
    if config is None:
        raise Http404("no such judge")
    return config


@extend_schema(summary="Judge configurations")
class JudgeList(generics.ListAPIView):
    serializer_class = JudgeConfigSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        validated_query(self.request, NoFilters, drop_blank=True)
        return JudgeConfig.objects.select_related("baseline", "judge_model").order_by("id")


@extend_schema(summary="A judge: its scores with intervals, its latest audit, its rank correlation with the arena")
class JudgeDetail(generics.RetrieveAPIView):
    serializer_class = JudgeDetailSerializer

    def get_object(self):
        validated_query(self.request, NoFilters, drop_blank=True, paged=False)
        return selectors.judge_page(_config(self.kwargs["pk"]), self.request.user)


@extend_schema(
    parameters=[JudgmentFilters],
    summary="A judge's judgments: each instruction in both orders (ab: the baseline's answer first)",
)
class JudgmentList(generics.ListAPIView):
    serializer_class = JudgmentSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        params = validated_query(self.request, JudgmentFilters, drop_blank=True)
        config = _config(self.kwargs["pk"])
        return selectors.judgments_queryset(config, params.get("model"), self.request.user)


@extend_schema(
    parameters=[JudgmentFilters],
    summary="A single-answer judge's grades: each question's turns, graded alone (turn 2 in context)",
)
class GradeList(generics.ListAPIView):
    serializer_class = GradeSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        params = validated_query(self.request, JudgmentFilters, drop_blank=True)
        config = _config(self.kwargs["pk"])
        return selectors.grades_queryset(config, params.get("model"), self.request.user)


@extend_schema(summary="Judge panels: several judges combined, with each judge's agreement with the panel")
class PanelList(generics.ListAPIView):
    serializer_class = PanelSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        validated_query(self.request, NoFilters, drop_blank=True)
        return JudgePanel.objects.prefetch_related("members").order_by("id")


@extend_schema(summary="A judge panel: panel scores with intervals and each judge's agreement with the rest")
class PanelDetail(generics.RetrieveAPIView):
    serializer_class = PanelSerializer

    def get_object(self):
        validated_query(self.request, NoFilters, drop_blank=True, paged=False)
        panel = JudgePanel.objects.prefetch_related("members").filter(pk=self.kwargs["pk"]).first()
        if panel is None:
            raise Http404("no such panel")
        return panel
