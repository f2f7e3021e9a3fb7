"""Publication's forms: agreeing to the terms, and reporting a battle."""

from django import forms


class ConsentForm(forms.Form):
    version = forms.CharField(
        max_length=40, strip=True, error_messages={"required": "Say which version of the terms you agree to."}
    )


class ReportForm(forms.Form):
    reason = forms.CharField(
        max_length=500, strip=True, error_messages={"required": "Say why you report this battle (a reason is required)."}
    )
