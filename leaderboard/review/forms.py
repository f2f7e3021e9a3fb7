"""Forms for staff: a review decision and a re-scoring request, each with a required comment."""

from __future__ import annotations

from django import forms

from leaderboard.models import ReviewAction

DECISIONS = [(k, v) for k, v in ReviewAction.Action.choices if k != ReviewAction.Action.FLAG]


class ReviewForm(forms.Form):
    action = forms.ChoiceField(choices=DECISIONS)
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 50}),
        max_length=2000,
        error_messages={"required": "A comment is required: say why (it is kept in the public audit log)."},
    )


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
