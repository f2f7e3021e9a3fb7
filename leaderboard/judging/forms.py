"""Query strings of the judge pages and downloads (an unknown, repeated or bad parameter is a 400)."""

from __future__ import annotations

from django import forms

from common.query import WholeNumberField


class JudgmentsForm(forms.Form):
    page = WholeNumberField(required=False, min_value=1, max_value=10**6)


class JudgmentsExportForm(forms.Form):
    model = WholeNumberField(required=False, min_value=1, max_value=2**31 - 1,
                               help_text="A catalogue model id: only its judgments.")  # fmt: skip
