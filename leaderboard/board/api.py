"""The leaderboard's read API under ``/api/``: submissions (models), scores, runs, per-document samples.

Same rules as the arena's API: every query parameter is validated (unknown, repeated or bad values
and page sizes past the limit are a 400 that says what is allowed), limit/offset pages, and only
what the requester may see (published entries, their own, everything for staff).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers

from common.api_params import StrictLimitOffsetPagination, validated_query
from leaderboard.models import EvaluationRun, SampleRecord, Score, Submission
from leaderboard.query_forms import SUBMISSION_PARAM, legacy_submission_redirect
from leaderboard.runs import selectors as selectors_runs
from leaderboard.runs.benchmarks import benchmark_key

SAMPLES_MAX_LIMIT = 200
TASK_FIELD = {"max_length": 200, "regex": r"^[A-Za-z0-9_.\-]+$"}


class SamplesPagination(StrictLimitOffsetPagination):
    """Records carry prompts and outputs: smaller pages."""

    default_limit = 20
    max_limit = SAMPLES_MAX_LIMIT


class SubmissionFilters(serializers.Serializer):
    type = serializers.ChoiceField(
        choices=Submission.ModelType.values, required=False, help_text="model type"
    )
    search = serializers.CharField(
        required=False, max_length=100, help_text="part of the model or base model name"
    )


SUBMISSION_FILTER = {
    "regex": SUBMISSION_PARAM, "max_length": 22,
    "help_text": "a submission's public id (the `id` of /api/submissions/); an earlier integer id redirects",
}  # fmt: skip


class ScoreFilters(serializers.Serializer):
    submission = serializers.RegexField(required=False, **SUBMISSION_FILTER)
    task = serializers.RegexField(required=False, help_text="a leaf task, e.g. gsm8k", **TASK_FIELD)
    benchmark = serializers.RegexField(required=False, help_text="mmlu, bbh, gsm8k, ...", **TASK_FIELD)
    metric = serializers.CharField(required=False, max_length=200, help_text="e.g. exact_match,strict-match")


class RunFilters(serializers.Serializer):
    submission = serializers.RegexField(required=False, **SUBMISSION_FILTER)
    task = serializers.RegexField(required=False, **TASK_FIELD)


class NoFilters(serializers.Serializer):
    pass


class SubmissionSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id", help_text="The public id: /api/submissions/{id}/, scores' and runs' `submission`")
    language_model = serializers.CharField(source="language_model.name")
    hidden = serializers.SerializerMethodField()
    superseded_by = serializers.CharField(
        source="superseded_by.public_id", default=None, allow_null=True,
        help_text="An endpoint evaluation re-run since: the later run's id (its scores are on the board), else null",
    )  # fmt: skip

    class Meta:
        model = Submission
        fields = [
            "id", "model_name", "language_model", "model_type", "base_model", "licence", "precision",
            "parameter_count", "architecture", "weight_sha256", "source", "apply_chat_template", "created_at",
            "finished_at", "hidden", "superseded_by",
        ]  # fmt: skip
        read_only_fields = fields

    def get_hidden(self, obj) -> bool:
        return obj.review_state == Submission.Review.HIDDEN


class ScoreSerializer(serializers.ModelSerializer):
    run = serializers.IntegerField(source="run_id")
    submission = serializers.CharField(source="run.submission.public_id", help_text="the submission's public id")
    model = serializers.CharField(source="run.submission.model_name")
    task = serializers.CharField(source="run.task")
    benchmark = serializers.SerializerMethodField()
    suite = serializers.CharField(source="run.suite.name")
    suite_version = serializers.IntegerField(source="run.suite.version")
    config_sha256 = serializers.CharField(source="run.config_sha256")

    class Meta:
        model = Score
        fields = [
            "id", "run", "submission", "model", "task", "benchmark", "suite", "suite_version", "metric", "value",
            "stderr", "ci_low", "ci_high", "n", "higher_is_better", "interval", "effective_n", "config_sha256",
            "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_benchmark(self, obj) -> str:
        return benchmark_key(obj.run.task)


class RunSerializer(serializers.ModelSerializer):
    submission = serializers.CharField(source="submission.public_id", help_text="the submission's public id")
    model = serializers.CharField(source="submission.model_name")
    suite = serializers.CharField(source="suite.name")
    suite_version = serializers.IntegerField(source="suite.version")
    protocol = serializers.SerializerMethodField(
        help_text="What produced the numbers; an endpoint's address only for staff (else \"(address withheld)\")"
    )

    class Meta:
        model = EvaluationRun
        fields = [
            "id", "submission", "model", "task", "suite", "suite_version", "status", "results", "protocol",
            "config_sha256", "code_version", "wall_time_s", "created_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields


    def get_protocol(self, obj) -> dict:
        request = self.context.get("request")
        return obj.submission.endpoint_withheld(obj.protocol, getattr(request, "user", None))


class SampleSerializer(serializers.ModelSerializer):
    class Meta:
        model = SampleRecord
        fields = ["doc_id", "payload"]
        read_only_fields = fields


@extend_schema(parameters=[SubmissionFilters], summary="Evaluated models (finished submissions)")
class SubmissionList(generics.ListAPIView):
    serializer_class = SubmissionSerializer
    pagination_class = StrictLimitOffsetPagination

    def get_queryset(self):
        params = validated_query(self.request, SubmissionFilters, drop_blank=True)
        return selectors_runs.submissions_queryset(
            self.request.user, model_type=params.get("type"), search=params.get("search")
        )


@extend_schema(parameters=[ScoreFilters], summary="Scores with standard errors and 95% intervals")
class ScoreList(generics.ListAPIView):
    serializer_class = ScoreSerializer
    pagination_class = StrictLimitOffsetPagination

    def list(self, request, *args, **kwargs):
        return legacy_submission_redirect(request, ("submission",)) or super().list(request, *args, **kwargs)

    def get_queryset(self):
        return selectors_runs.scores_queryset(self.request.user, **validated_query(self.request, ScoreFilters, drop_blank=True))


@extend_schema(
    parameters=[RunFilters], summary="Evaluation runs with their protocol and code version"
)
class RunList(generics.ListAPIView):
    serializer_class = RunSerializer
    pagination_class = StrictLimitOffsetPagination

    def list(self, request, *args, **kwargs):
        return legacy_submission_redirect(request, ("submission",)) or super().list(request, *args, **kwargs)

    def get_queryset(self):
        return selectors_runs.runs_queryset(self.request.user, **validated_query(self.request, RunFilters, drop_blank=True))


@extend_schema(summary="One evaluation run")
class RunDetail(generics.RetrieveAPIView):
    serializer_class = RunSerializer

    def get_object(self):
        validated_query(self.request, NoFilters, drop_blank=True, paged=False)
        run = selectors_runs.run_visible(self.request.user, self.kwargs["pk"])
        if run is None:
            raise Http404("no such run")
        return run


@extend_schema(summary="A run's per-document records (prompt, target, outputs, filtered answers, metrics)")
class SampleList(generics.ListAPIView):
    serializer_class = SampleSerializer
    pagination_class = SamplesPagination

    def get_queryset(self):
        validated_query(self.request, NoFilters, drop_blank=True)
        run = selectors_runs.run_visible(self.request.user, self.kwargs["pk"])
        if run is None:
            raise Http404("no such run")
        return selectors_runs.samples_queryset(run)
