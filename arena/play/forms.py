"""The battle's forms: a prompt (a battle's first or a later turn) and a vote."""

from django import forms
from django.conf import settings

from arena.models import Vote


class PromptForm(forms.Form):
    prompt = forms.CharField(
        strip=True,
        max_length=settings.ARENA_MAX_PROMPT_CHARS,
        error_messages={
            "required": "Type a prompt first.",
            "max_length": f"The prompt is too long: at most {settings.ARENA_MAX_PROMPT_CHARS} characters.",
        },
    )


class VoteForm(forms.Form):
    winner = forms.ChoiceField(
        choices=Vote.Winner.choices,
        error_messages={"required": "Choose a vote.", "invalid_choice": "Unknown vote: %(value)s."},
    )
