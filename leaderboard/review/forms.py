"""Forms for staff: a review decision and a re-scoring request, each with a required comment."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from leaderboard.evaluation.scans import corpus_check
from leaderboard.models import REVIEW_ACTIONS, ReviewAction

DECISIONS = [(a.value, a.label) for a in REVIEW_ACTIONS[ReviewAction.Target.SUBMISSION] if a != ReviewAction.Action.FLAG]
COMMENT_REQUIRED = "A comment is required: say why (it is kept in the audit log)."


class ReviewForm(forms.Form):
    action = forms.ChoiceField(choices=DECISIONS)
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 50}),
        max_length=2000,
        error_messages={"required": "A comment is required: say why (it is kept in the public audit log)."},
    )


class VoterReviewForm(forms.Form):
    """Confirm (the voter's votes leave the next snapshot) or dismiss a flagged voter."""

    action = forms.ChoiceField(choices=[(a.value, a.label) for a in REVIEW_ACTIONS[ReviewAction.Target.VOTER]])
    comment = forms.CharField(max_length=2000, error_messages={"required": COMMENT_REQUIRED})


class IdentityReviewForm(forms.Form):
    """Keep an identity-revealing vote out, or restore it (it counts again)."""

    action = forms.ChoiceField(choices=[(a.value, a.label) for a in REVIEW_ACTIONS[ReviewAction.Target.IDENTITY]])
    comment = forms.CharField(max_length=2000, error_messages={"required": COMMENT_REQUIRED})


class BattleReviewForm(forms.Form):
    """Release a held battle (it is published as usual) or keep it held for good."""

    action = forms.ChoiceField(choices=[(a.value, a.label) for a in REVIEW_ACTIONS[ReviewAction.Target.BATTLE]])
    comment = forms.CharField(max_length=2000, error_messages={"required": COMMENT_REQUIRED})


class RescoreForm(forms.Form):
    task = forms.ChoiceField(choices=())
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 50}),
        max_length=250,
        error_messages={"required": "A comment is required: say what was fixed."},
    )

    def __init__(self, *args, tasks: list[tuple[str, int]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [(task, f"{task} ({n} runs)") for task, n in tasks]


class ScanForm(forms.Form):
    """An n-gram scan of a training corpus (a path the workers can read) for a submission's items."""

    corpus = forms.CharField(max_length=1000, help_text="Absolute path of a .txt / .jsonl file (either gzipped) or a folder of them.")
    n = forms.IntegerField(required=False, min_value=8, max_value=13, label="n-gram length",
                           help_text="8 to 13 (default: LEADERBOARD_SCAN_NGRAM).")  # fmt: skip

    def clean_corpus(self) -> str:
        try:
            return corpus_check(self.cleaned_data["corpus"])
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from None


class TagSampleForm(forms.Form):
    """Which tagged category to sample (one of the configured ones) and, optionally, the draw's seed."""

    category = forms.ChoiceField(choices=())
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1)

    def __init__(self, *args, categories: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["category"].choices = [(c, c) for c in categories]


class TagReviewForm(TagSampleForm):
    """A staff member's check of one tag: the prompt is in the category (``yes``) or not (``no``)."""

    tag = forms.IntegerField(min_value=1, max_value=2**63 - 1)
    value = forms.ChoiceField(choices=[("yes", "In the category"), ("no", "Not in the category")])
