"""The arena catalogue's admin (Admin › Language models) with the leaderboard's action on it: "Evaluate
this arena model", for a model served by an OpenAI-compatible endpoint, from the list (an action on the
selected models) or from its change page (a button). Both go through
:func:`leaderboard.submissions.services.endpoint_evaluation_request`, which refuses a model without an
endpoint, a non-staff user, and a second request while one is queued; arena never imports leaderboard,
so the leaderboard registers this subclass of arena's admin in its place."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.html import format_html

from arena.admin import LanguageModelAdmin
from arena.models import LanguageModel
from leaderboard.submissions.services import endpoint_evaluation_request

EVALUATE = "Evaluate this arena model"


class LanguageModelEvaluateAdmin(LanguageModelAdmin):
    actions = [*(LanguageModelAdmin.actions or ()), "evaluate"]
    change_form_template = "admin/arena/languagemodel/evaluate_change_form.html"

    @admin.action(description=f"{EVALUATE} (benchmark suite through its endpoint)", permissions=["change"])
    def evaluate(self, request, queryset):
        for model in queryset.order_by("name"):
            self.evaluate_one(request, model)

    def evaluate_one(self, request, model: LanguageModel) -> None:
        """Queue (or find queued) ``model``'s evaluation and say so, linking the submission."""
        try:
            submission, created = endpoint_evaluation_request(model=model, requested_by=request.user)
        except PermissionDenied as exc:
            self.message_user(request, f"{model}: {exc}", messages.ERROR)
            return
        except ValidationError as exc:
            self.message_user(request, f"{model}: {' '.join(exc.messages)}", messages.WARNING)
            return
        link = reverse("admin:leaderboard_submission_change", args=[submission.pk])
        if created:
            text = format_html('{}: evaluation <a href="{}">#{}</a> queued on the evaluate queue.', model, link,
                               submission.pk)  # fmt: skip
            self.message_user(request, text, messages.SUCCESS)
        else:
            text = format_html('{}: evaluation <a href="{}">#{}</a> is already {} (nothing added).', model, link,
                               submission.pk, submission.get_status_display().lower())  # fmt: skip
            self.message_user(request, text, messages.INFO)

    def get_urls(self):
        own = path("<path:object_id>/evaluate/", self.admin_site.admin_view(self.evaluate_view),
                   name="arena_languagemodel_evaluate")  # fmt: skip
        return [own, *super().get_urls()]

    def evaluate_view(self, request, object_id):
        """The change page's button (POST only): evaluate this one model, back to its page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        model = self.get_object(request, object_id)
        if model is None or not self.has_change_permission(request, model):
            raise PermissionDenied
        self.evaluate_one(request, model)
        return redirect(reverse("admin:arena_languagemodel_change", args=[model.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {**(extra_context or {}), "evaluate_label": EVALUATE}
        if object_id and self.has_change_permission(request):
            context["evaluate_url"] = reverse("admin:arena_languagemodel_evaluate", args=[object_id])
        return super().change_view(request, object_id, form_url, extra_context=context)


admin.site.unregister(LanguageModel)
admin.site.register(LanguageModel, LanguageModelEvaluateAdmin)
