"""Django admin for the leaderboard. Reviews are added as ReviewActions (comment required), which
go through the review services (``review_record``) so the item's state and the audit log always agree."""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from leaderboard import catalogue_admin  # noqa: F401 - Admin › Language models gains "Evaluate this arena model"
from leaderboard.accounts import tokens
from leaderboard.judging.panels import panel_refresh
from leaderboard.judging.services import (
    AUDIT_LIMIT_DEFAULT,
    AUDIT_PAIRS_DEFAULT,
    judge_audit_request,
    judge_candidates,
    judge_config_check,
    judge_run_request,
    judge_run_requeue,
)
from leaderboard.models import (
    ApiToken,
    BenchmarkSuite,
    ContaminationScan,
    EvaluationRun,
    JudgeAudit,
    JudgeConfig,
    JudgePanel,
    JudgeRun,
    MemorisationProbe,
    ReviewAction,
    SampleRecord,
    ScanTaskResult,
    Score,
    ScoreHistory,
    Submission,
    SubmissionDraft,
)
from leaderboard.review.services import review_record
from leaderboard.rewards import admin as reward_admin  # noqa: F401 - Admin › Reward model results, "Score a reward model"
from leaderboard.submissions.services import submission_requeue


class ReviewActionInline(admin.TabularInline):
    model = ReviewAction
    extra = 0
    can_delete = False
    fields = ("admin", "action", "comment", "created_at")
    readonly_fields = ("admin", "action", "comment", "created_at")

    def has_add_permission(self, request, obj=None):
        return False  # add reviews on the Review actions page, where the service records them


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "model_name", "owner", "model_type", "parameter_count", "precision", "status",
                    "review_state", "private", "created_at")  # fmt: skip
    list_filter = ("status", "review_state", "model_type", "precision", "private", "source")
    search_fields = ("model_name", "owner__username", "weight_sha256", "base_model")
    readonly_fields = ("owner", "language_model", "weight_sha256", "parameter_count", "total_bytes", "storage_path",
                       "source", "architecture", "status", "failure_reason", "log_tail", "progress", "attempts", "heartbeat_at",
                       "created_at", "started_at", "finished_at", "review_state", "review_page",
                       "superseded_by")  # fmt: skip
    inlines = [ReviewActionInline]
    actions = ["requeue"]

    @admin.display(description="Review")
    def review_page(self, obj):
        """Approve / hide / reject with a comment on the staff review page (the service writes the log)."""
        if obj.pk is None:
            return "-"
        return format_html('<a href="{}">Approve, hide or reject on the review page</a>',
                           reverse("leaderboard:review-submission", args=[obj.public_id]))  # fmt: skip

    @admin.action(description="Requeue the selected failed submissions")
    def requeue(self, request, queryset):
        for submission in queryset:
            try:
                submission_requeue(submission)
            except ValidationError as exc:
                self.message_user(request, f"{submission}: {' '.join(exc.messages)}", messages.WARNING)


class ReviewActionForm(forms.ModelForm):
    """An audit entry added by hand: the decision is made by the review services in ``clean`` (so a
    refused one, e.g. an item already decided, is a form error and nothing is written)."""

    class Meta:
        model = ReviewAction
        fields = ("kind", "submission", "voter_flag", "vote", "action", "comment")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].required = False  # a submission, unless said otherwise

    def clean(self):
        data = super().clean()
        kind = data["kind"] = data.get("kind") or ReviewAction.Target.SUBMISSION
        target = {"submission": data.get("submission"), "voter": data.get("voter_flag"), "identity": data.get("vote")}
        if kind and target.get(kind) is None:
            raise ValidationError(f"Choose the {ReviewAction.Target(kind).label.lower()} this decision is about.")
        if kind and any(v is not None for k, v in target.items() if k != kind):
            raise ValidationError("Fill in only the item of the chosen kind.")
        if kind == "voter" and target["voter"].status != "pending":
            raise ValidationError("This voter was already decided.")
        if kind == "identity" and target["identity"].excluded_reason != "identity_revealed":
            raise ValidationError("This vote is not waiting for an identity decision.")
        return data


@admin.register(ReviewAction)
class ReviewActionAdmin(admin.ModelAdmin):
    """The one audit log: every decision of the review queue (submissions, voters, identity votes)."""

    form = ReviewActionForm
    list_display = ("created_at", "kind", "target", "action", "admin", "comment")
    list_filter = ("kind", "action")
    search_fields = ("comment", "admin__username", "submission__model_name", "voter_flag__voter_hash")
    readonly_fields = ("admin", "created_at")
    autocomplete_fields = ("submission",)
    raw_id_fields = ("voter_flag", "vote")

    @admin.display(description="Item")
    def target(self, obj):
        return obj.submission or obj.voter_flag or (f"vote #{obj.vote_id}" if obj.vote_id else "-")

    def has_change_permission(self, request, obj=None):
        return obj is None  # the audit log is append-only

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        target = obj.submission_id or obj.voter_flag_id or obj.vote_id
        entry = review_record(
            kind=obj.kind, target_id=target, admin=request.user, action=obj.action, comment=obj.comment
        )
        obj.pk = entry.pk


@admin.register(BenchmarkSuite)
class BenchmarkSuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "created_at")
    readonly_fields = ("name", "version", "tasks", "tasks_sha256", "created_at")

    def has_add_permission(self, request):
        return False  # suites are frozen from settings by suite_freeze, never edited


class ScoreInline(admin.TabularInline):
    model = Score
    extra = 0
    readonly_fields = ("metric", "value", "stderr", "ci_low", "ci_high", "n", "higher_is_better", "interval")


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    list_display = ("submission", "suite", "task", "status", "wall_time_s", "finished_at")
    list_filter = ("status", "suite", "task")
    readonly_fields = ("submission", "suite", "task", "config_sha256", "code_version", "protocol", "results")
    inlines = [ScoreInline]
    actions = ["rescore"]

    @admin.action(description="Re-score this task from stored samples")
    def rescore(self, request, queryset):
        """The staff page asks for the comment and queues the re-scoring of every run of the task."""
        tasks = sorted(set(queryset.values_list("task", flat=True)))
        if len(tasks) != 1:
            self.message_user(request, "Select runs of one task to re-score it.", messages.WARNING)
            return None
        return redirect(f"{reverse('leaderboard:review-rescore')}?{urlencode({'task': tasks[0]})}")


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    list_display = ("run", "metric", "value", "ci_low", "ci_high", "n")
    search_fields = ("metric", "run__task", "run__submission__model_name")


@admin.register(SampleRecord)
class SampleRecordAdmin(admin.ModelAdmin):
    list_display = ("run", "doc_id")
    raw_id_fields = ("run",)


@admin.register(ScoreHistory)
class ScoreHistoryAdmin(admin.ModelAdmin):
    list_display = ("run", "metric", "value", "reason", "replaced_at")


class JudgeConfigForm(forms.ModelForm):
    """Validated by the service: the protocol parses, the judge can be loaded, the instructions are sane."""

    class Meta:
        model = JudgeConfig
        fields = ["name", "judge_model", "judge_backend", "judge_model_args", "protocol_name", "protocol_yaml",
                  "baseline", "instructions", "questions_file", "references_file", "reference_mode", "max_new_tokens",
                  "active"]  # fmt: skip

    def _post_clean(self):
        super()._post_clean()
        if not self.errors:
            try:
                judge_config_check(self.instance)
            except ValidationError as exc:
                self._update_errors(exc)


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    form = JudgeConfigForm
    list_display = ("name", "kind", "judge_model", "judge_backend", "protocol_name", "baseline", "active", "created_at")
    list_filter = ("active", "kind")
    readonly_fields = ("kind", "protocol_sha256", "instructions_sha256", "created_at")
    actions = ["judge_every_model", "audit"]

    @admin.action(description="Judge every arena model and finished submission with the selected judges")
    def judge_every_model(self, request, queryset):
        queued = 0
        for config in queryset:
            for model in judge_candidates():
                queued += judge_run_request(config, model) is not None
        self.message_user(request, f"{queued} judge run(s) queued on the judge queue.")

    @admin.action(description=f"Audit the selected judges on the first {AUDIT_LIMIT_DEFAULT} pairs of {AUDIT_PAIRS_DEFAULT}")
    def audit(self, request, queryset):
        for config in queryset:
            judge_audit_request(config)
        self.message_user(request, f"{queryset.count()} audit(s) queued on the judge queue.")


class JudgePanelForm(forms.ModelForm):
    """A panel combines two or more judges of one kind (pairwise or single-answer)."""

    class Meta:
        model = JudgePanel
        fields = ["name", "description", "members"]

    def clean_members(self):
        members = list(self.cleaned_data.get("members") or [])
        if len(members) < 2:
            raise ValidationError("a panel combines at least two judges")
        if len({m.kind for m in members}) > 1:
            raise ValidationError("a panel combines judges of one kind: choose only pairwise or only single-answer judges")
        return self.cleaned_data["members"]


@admin.register(JudgePanel)
class JudgePanelAdmin(admin.ModelAdmin):
    form = JudgePanelForm
    list_display = ("name", "refreshed_at", "created_at")
    readonly_fields = ("report", "refreshed_at", "created_at")
    filter_horizontal = ("members",)
    actions = ["refresh"]

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        panel_refresh(form.instance.pk)  # from the stored grades and judgments: no model call

    @admin.action(description="Recompute the selected panels from their judges' stored results")
    def refresh(self, request, queryset):
        for panel in queryset:
            panel_refresh(panel.pk)
        self.message_user(request, f"{queryset.count()} panel(s) recomputed.")


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("id", "config", "model", "status", "attempts", "created_at", "finished_at")
    list_filter = ("status", "config")
    readonly_fields = ("config", "model", "status", "failure_reason", "progress", "attempts", "heartbeat_at", "worker",
                       "judge_key", "protocol_sha256", "instructions_sha256", "results", "created_at", "finished_at")  # fmt: skip
    actions = ["requeue"]

    def has_add_permission(self, request):
        return False  # runs are requested by the service (a finished submission, or the judge's action)

    @admin.action(description="Send the selected waiting or interrupted runs again")
    def requeue(self, request, queryset):
        for run in queryset:
            judge_run_requeue(run)


@admin.register(JudgeAudit)
class JudgeAuditAdmin(admin.ModelAdmin):
    list_display = ("id", "config", "pairs_file", "limit", "status", "created_at", "finished_at")
    list_filter = ("status", "config")
    readonly_fields = ("status", "failure_reason", "judge_key", "protocol_sha256", "report", "created_at", "finished_at")
    fields = ("config", "pairs_file", "limit", *readonly_fields)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        audit = judge_audit_request(obj.config, pairs_file=obj.pairs_file, limit=obj.limit)
        obj.pk = audit.pk
        return None


class ScanTaskResultInline(admin.TabularInline):
    model = ScanTaskResult
    extra = 0
    can_delete = False
    readonly_fields = ("task", "items", "flagged", "share", "flagged_doc_ids")
    exclude = ("matches",)


@admin.register(ContaminationScan)
class ContaminationScanAdmin(admin.ModelAdmin):
    """Scans are requested on the staff page ``/leaderboard/review/<id>/scan/`` or with
    ``manage.py contamination_scan``; here they are read only."""

    list_display = ("id", "submission", "kind", "status", "n", "created_at", "finished_at")
    list_filter = ("kind", "status")
    readonly_fields = ("submission", "kind", "corpus", "requested_by", "n", "status", "failure_reason", "report",
                       "created_at", "finished_at")  # fmt: skip
    inlines = [ScanTaskResultInline]


@admin.register(SubmissionDraft)
class SubmissionDraftAdmin(admin.ModelAdmin):
    """Submissions whose files are arriving (or were refused or expired): read-only."""

    list_display = ("public_id", "owner", "state", "created_at", "expires_at")
    list_filter = ("state",)
    search_fields = ("public_id", "owner__username")
    exclude = ("weights_state",)

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(MemorisationProbe)
class MemorisationProbeAdmin(admin.ModelAdmin):
    list_display = ("submission", "task", "limit", "difference", "diff_ci_low", "diff_ci_high", "created_at")
    readonly_fields = ("submission", "task", "limit", "difference", "diff_ci_low", "diff_ci_high", "summary", "hits")

    def has_add_permission(self, request):
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Personal API tokens (only prefixes; the tokens are not stored): revoke from the list."""

    list_display = ("prefix", "name", "owner", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("owner", "name", "prefix", "digest", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = tokens.tokens_revoke(queryset.values_list("pk", flat=True))
        self.message_user(request, f"{revoked} tokens revoked.")
