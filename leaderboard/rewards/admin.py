"""Admin › Reward model results: imported and site-scored results (read only: staff may delete one, never
edit a figure), and "Score a reward model": a form that queues the scoring of a checkpoint on a pairs
file on the ``judge`` queue through :func:`leaderboard.rewards.services.reward_score_request`."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from leaderboard.models import RewardKind, RewardModelResult
from leaderboard.rewards.services import reward_score_request

SCORE = "Score a reward model"


class RewardScoreForm(forms.Form):
    name = forms.CharField(max_length=100, required=False,
                           help_text="The reward model's name on the board (default: the checkpoint folder's name).")
    checkpoint = forms.CharField(max_length=300, help_text="A folder under PODIUM_MODELS_DIR (relative, no '..').")
    kind = forms.ChoiceField(choices=RewardKind.choices, initial=RewardKind.CLASSIFIER)
    reference = forms.CharField(max_length=300, required=False,
                                help_text="DPO only: the reference model's folder under PODIUM_MODELS_DIR.")
    beta = forms.FloatField(required=False, help_text="DPO only: beta (default 0.1).")
    pairs_file = forms.CharField(max_length=300, initial="judges/llmbar_natural.json",
                                 help_text="Under PODIUM_DATA_DIR: judges/llmbar_natural.json, "
                                           "judges/mtbench_human_majority.json, or a file of your own.")
    limit = forms.IntegerField(required=False, min_value=1, help_text="Score only the first N pairs.")  # fmt: skip


@admin.register(RewardModelResult)
class RewardModelResultAdmin(admin.ModelAdmin):
    """Reward models come in through ``manage.py reward_import`` or "Score a reward model" (figures
    recomputed from the per-pair rewards either way); here staff see and delete them."""

    list_display = ("name", "kind", "status", "accuracy", "pairs_key", "imported_at")
    list_filter = ("kind", "status")
    readonly_fields = ("name", "kind", "status", "failure_reason", "request", "requested_by", "attempts", "heartbeat_at",
                       "worker", "pairs_key", "weights_sha256", "accuracy", "report", "imported_at")  # fmt: skip
    change_list_template = "leaderboard/reward_admin_change_list.html"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_urls(self):
        own = path("score/", self.admin_site.admin_view(self.score_view), name="leaderboard_rewardmodelresult_score")
        return [own, *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        context = {**(extra_context or {}), "score_label": SCORE,
                   "score_url": reverse("admin:leaderboard_rewardmodelresult_score")}  # fmt: skip
        return super().changelist_view(request, extra_context=context)

    def score_view(self, request):
        """GET: the form; POST: queue the scoring (or find it queued) and go back to the list."""
        if not (request.user.is_staff and self.has_view_permission(request)):
            raise PermissionDenied
        form = RewardScoreForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                result, queued = reward_score_request(
                    name=data["name"], checkpoint=data["checkpoint"], kind=data["kind"], reference=data["reference"],
                    beta=data["beta"], pairs_file=data["pairs_file"], limit=data["limit"], requested_by=request.user,
                )  # fmt: skip
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                link = reverse("admin:leaderboard_rewardmodelresult_change", args=[result.pk])
                text = ('{}: scoring <a href="{}">#{}</a> queued on the judge queue.' if queued
                        else '{}: scoring <a href="{}">#{}</a> is {} (nothing added).')  # fmt: skip
                self.message_user(request, format_html(text, result.name, link, result.pk, result.get_status_display()),
                                  messages.SUCCESS if queued else messages.INFO)  # fmt: skip
                return redirect(reverse("admin:leaderboard_rewardmodelresult_changelist"))
        context = {**self.admin_site.each_context(request), "title": SCORE, "form": form, "opts": self.model._meta}
        return TemplateResponse(request, "leaderboard/reward_admin_score.html", context)
