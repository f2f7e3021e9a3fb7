"""The arena catalogue's admin (Admin › Language models) with the leaderboard's action on it: "Evaluate
this arena model", for a model served by an OpenAI-compatible endpoint, from the list (an action on the
selected models) or from its change page (a button). Both go through
:func:`leaderboard.submissions.endpoint.endpoint_evaluation_request`, which refuses a model without an
endpoint, a non-staff user, and a second request while one is queued; arena never imports leaderboard,
so the leaderboard registers this subclass of arena's admin in its place.

A model evaluated already is re-run only after a confirmation page, which names the evaluation whose
scores the re-run will replace (``rerun_of``): a confirmation that no longer matches (another re-run
finished meanwhile) re-runs nothing, and a second click while the re-run is queued adds nothing."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from arena.admin import LanguageModelAdmin
from arena.models import LanguageModel
from leaderboard.submissions.endpoint import (
    endpoint_evaluation_current,
    endpoint_evaluation_request,
    endpoint_spec,
)

EVALUATE = "Evaluate this arena model"
CONFIRM_TEMPLATE = "admin/arena/languagemodel/evaluate_rerun_confirmation.html"


def _usable(model: LanguageModel) -> bool:
    """Whether ``model`` still has an endpoint to re-run through (else it is refused at once, unasked)."""
    try:
        endpoint_spec(model)
    except ValidationError:
        return False
    return True


def _confirmed(request) -> set[int]:
    """The evaluations a posted confirmation agreed to replace (``rerun_of``: ids; anything else ignored)."""
    return {int(v) for v in request.POST.getlist("rerun_of") if v.isdigit() and len(v) < 19}


class LanguageModelEvaluateAdmin(LanguageModelAdmin):
    actions = [*(LanguageModelAdmin.actions or ()), "evaluate"]
    change_form_template = "admin/arena/languagemodel/evaluate_change_form.html"

    @admin.action(description=f"{EVALUATE} (benchmark suite through its endpoint)", permissions=["change"])
    def evaluate(self, request, queryset):
        chosen = list(queryset.order_by("name"))
        if request.user.is_staff and "rerun" not in request.POST:
            evaluated = [(m, c) for m in chosen if (c := endpoint_evaluation_current(m)) is not None and _usable(m)]
            if evaluated:
                return self.rerun_confirmation(request, evaluated, chosen=chosen)
        confirmed = _confirmed(request) if request.POST.get("rerun") == "yes" else set()
        for model in chosen:
            self.evaluate_one(request, model, confirmed=confirmed)
        return None

    def rerun_confirmation(self, request, evaluated: list, *, chosen: list, button_url: str = ""):
        """The page that asks before re-running models evaluated already (their current evaluations named)."""
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "title": "Re-run the evaluation?",
            "evaluated": [{"model": m, "current": c, "suites": sorted({str(r.suite) for r in c.runs.all()})}
                          for m, c in evaluated],
            "others": [m for m in chosen if m not in {m for m, _ in evaluated}],
            "chosen": chosen, "button_url": button_url, "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }  # fmt: skip
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)

    def evaluate_one(self, request, model: LanguageModel, *, confirmed: set[int] = frozenset()) -> None:
        """Queue (or find queued) ``model``'s evaluation and say so, linking the submission; a re-run
        only where ``confirmed`` names the evaluation it replaces."""
        current = endpoint_evaluation_current(model)
        rerun_of = current.pk if current is not None and current.pk in confirmed else None
        try:
            submission, created = endpoint_evaluation_request(model=model, requested_by=request.user, rerun_of=rerun_of)
        except PermissionDenied as exc:
            self.message_user(request, f"{model}: {exc}", messages.ERROR)
            return
        except ValidationError as exc:
            self.message_user(request, f"{model}: {' '.join(exc.messages)}", messages.WARNING)
            return
        link = reverse("admin:leaderboard_submission_change", args=[submission.pk])
        if created and rerun_of is not None:
            text = format_html('{}: re-run <a href="{}">#{}</a> queued on the evaluate queue; its scores replace those '
                               'of #{} on the board when it finishes.', model, link, submission.pk, rerun_of)  # fmt: skip
            self.message_user(request, text, messages.SUCCESS)
        elif created:
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
        """The change page's button (POST only): evaluate this one model, back to its page (a model
        evaluated already: the confirmation page first)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        model = self.get_object(request, object_id)
        if model is None or not self.has_change_permission(request, model):
            raise PermissionDenied
        current = endpoint_evaluation_current(model)
        if current is not None and "rerun" not in request.POST and _usable(model):
            url = reverse("admin:arena_languagemodel_evaluate", args=[model.pk])
            return self.rerun_confirmation(request, [(model, current)], chosen=[model], button_url=url)
        self.evaluate_one(request, model, confirmed=_confirmed(request) if request.POST.get("rerun") == "yes" else set())
        return redirect(reverse("admin:arena_languagemodel_change", args=[model.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {**(extra_context or {}), "evaluate_label": EVALUATE}
        if object_id and self.has_change_permission(request):
            context["evaluate_url"] = reverse("admin:arena_languagemodel_evaluate", args=[object_id])
        return super().change_view(request, object_id, form_url, extra_context=context)


admin.site.unregister(LanguageModel)
admin.site.register(LanguageModel, LanguageModelEvaluateAdmin)
