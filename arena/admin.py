from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse

from arena.catalogue.services import RETIRE_REASON_MAX, models_retire, retire_reason_clean
from arena.categories.services import categorizations_retry
from arena.models import LanguageModel, PromptTag, VoteCategorization, VoterFlag
from arena.ratings.anchor import anchor_refusal_message

RETIRE_TEMPLATE = "admin/arena/languagemodel/retire_confirmation.html"


class RetireForm(forms.Form):
    reason = forms.CharField(
        max_length=RETIRE_REASON_MAX, label="Reason (shown publicly)",
        widget=forms.TextInput(attrs={"size": 80, "placeholder": "e.g. superseded by v2; endpoint withdrawn"}),
    )  # fmt: skip

    def clean_reason(self) -> str:
        return retire_reason_clean(self.cleaned_data["reason"])


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    """Edits go through the model's validation (a retirement needs its reason; licence, cutoff and link
    have fixed forms), so a bad value is an error on the form, never a half-saved row.

    No model is removed: there is no delete (action, button or permission), as a model's votes, ratings
    and scores must stay reproducible; a model leaves by retirement, the action "Retire selected models"
    (a reason, then the time is now: :func:`arena.catalogue.services.models_retire`)."""

    list_display = ("name", "organisation", "licence", "open_weights", "in_arena", "public", "retired_at")
    list_filter = ("open_weights", "in_arena", "public")
    search_fields = ("name", "family", "maker", "organisation", "licence")
    actions = ["retire"]

    def has_delete_permission(self, request, obj=None):
        return False  # models are retired, never deleted (docs/arena-ratings.md, "Retired models")

    @admin.action(description="Retire selected models", permissions=["change"])
    def retire(self, request, queryset):
        """First the form asking for the reason; posted back with it, retire the selected models now."""
        chosen = list(queryset.order_by("name"))
        form = RetireForm(request.POST if "retire_confirmed" in request.POST else None)
        if form.is_bound and form.is_valid():
            try:
                retired = models_retire([m.pk for m in chosen], reason=form.cleaned_data["reason"])
            except ValidationError as exc:
                self.message_user(request, " ".join(exc.messages), messages.ERROR)
                return None
            self._retired_message(request, chosen, retired)
            return None
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "title": "Retire models",
            "form": form, "chosen": chosen,
            "declared": [m for m in chosen if m.in_arena and m.retired_at is None],
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }  # fmt: skip
        return TemplateResponse(request, RETIRE_TEMPLATE, context)

    def _retired_message(self, request, chosen: list, retired: list) -> None:
        names = ", ".join(m.name for m in retired)
        kept = len(chosen) - len(retired)
        note = f" ({kept} selected were retired already: their date and reason are kept)" if kept else ""
        if retired:
            self.message_user(request, f"Retired {len(retired)} model(s): {names}{note}.", messages.SUCCESS)
        else:
            self.message_user(request, f"Nothing retired{note}.", messages.WARNING)
        declared = [m.name for m in retired if m.in_arena]
        if declared:
            self.message_user(
                request, f"{', '.join(declared)}: declared in the arena's catalogue file; add retired: with the "
                "reason there too, or the next catalogue sync brings the model back.", messages.WARNING,
            )  # fmt: skip

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        self._anchor_warning(request, obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "GET" and object_id:
            model = self.get_object(request, object_id)
            if model is not None:
                self._anchor_warning(request, model)
        return super().change_view(request, object_id, form_url, extra_context)

    def _anchor_warning(self, request, model: LanguageModel) -> None:
        """The scale's anchor (ARENA_ANCHOR_MODEL) not shown publicly: refits refuse it (arena.ratings.anchor)."""
        message = anchor_refusal_message(model)
        if message:
            self.message_user(request, message, messages.WARNING)


@admin.register(VoterFlag)
class VoterFlagAdmin(admin.ModelAdmin):
    """Read-only: flags are decided on the staff review queue (/leaderboard/review/), which keeps the
    audit log (leaderboard's Review actions)."""

    list_display = ("created_at", "kind", "voter_hash", "votes", "p_value", "status", "decided_at")
    list_filter = ("kind", "status")
    search_fields = ("voter_hash",)
    readonly_fields = ("kind", "voter_hash", "votes", "p_value", "statistics", "status", "created_at", "decided_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(PromptTag)
class PromptTagAdmin(ReadOnlyAdmin):
    """Read-only: tags are the tagger's (docs/categories.md); staff check them on
    /leaderboard/review/categories/, which shows only published prompts, redacted. No prompt text here."""

    list_display = ("created_at", "category", "value", "score", "protocol", "protocol_version", "tagger_name")
    list_filter = ("category", "value", "protocol", "protocol_version")
    search_fields = ("prompt_sha256", "tagger")


@admin.register(VoteCategorization)
class VoteCategorizationAdmin(ReadOnlyAdmin):
    """The tagging queue's state per vote (pending, done, failed with the error), read-only but for one
    action: put the selected failed rows back in the queue (after the tagger was fixed), as
    :func:`arena.categories.services.categorizations_retry` does for all of them."""

    list_display = ("vote_id", "status", "attempts", "updated_at", "error")
    list_filter = ("status",)
    search_fields = ("prompt_sha256",)
    actions = ["retry_failed"]

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("arena.change_votecategorization")

    @admin.action(description="Retry the selected failed categorisations", permissions=["retry"])
    def retry_failed(self, request, queryset):
        selected = list(queryset.values_list("pk", flat=True))
        count = categorizations_retry(selected)
        skipped = len(selected) - count
        note = f" ({skipped} selected were not failed: left as they are)" if skipped else ""
        level = messages.SUCCESS if count else messages.WARNING
        self.message_user(request, f"{count} failed categorisation(s) put back in the tagging queue{note}.", level)
