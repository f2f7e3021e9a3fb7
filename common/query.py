"""The one parser of query strings, for the API (DRF serializers, common.api_params) and the pages
(Django forms, leaderboard.query_forms) alike, so the same input gets the same answer everywhere
(docs/api.md, "Query parameters"):

- a name the endpoint does not take, or a name given twice, is refused with the names it takes;
- whole numbers (``limit``, ``offset``, ``page``, ``doc``, ids) are ASCII digits only: Python's ``int()``
  also reads other scripts' digits (``"١"`` is 1) and surrounding spaces, which Django's and DRF's
  integer fields therefore accepted;
- ``category`` and ``language`` are trimmed; ``language`` is compared in lower case (codes are stored
  that way: ``JA`` means ``ja``); ``category`` is ``name`` or ``name:value`` as the board lists them;
- ``since`` later than ``until`` is a 400 naming both values, not an empty page.

Each rule is one function here; the field classes below wrap them for each framework.
"""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError as FormError
from rest_framework import serializers

# As JSON Schema patterns too (the OpenAPI schema carries them, so its fuzz test generates valid values).
CATEGORY_PATTERN = r"^[a-z_]+(:[A-Za-z0-9_-]{1,16})?$"
LANGUAGE_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,15}$"
CATEGORY_HELP = "overall, multi_turn, long_prompt, language:<code>, or a tagged category (name or name:value)"
LANGUAGE_HELP = "a language code such as en or ja (any case)"
# The arena board's catalogue filters (issue 31): an organisation is one line of printable text, a
# licence a name such as apache-2.0, open weights and the retired toggle yes or no.
# Control and invisible format characters (C0, C1, soft hyphen, zero-width and bidirectional controls,
# line/paragraph separators, BOM, specials) are refused; the pattern is the whole rule, so the schema
# states exactly what the server takes.
ORGANISATION_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff0-\uffff]{1,200}$"
LICENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 .+_()/-]{0,99}$"
ORGANISATION_HELP = "an organisation as the board lists it, e.g. HuggingFace"
LICENCE_HELP = "a licence as the board lists it, e.g. apache-2.0"
YES_NO = ("yes", "no")


def query_problems(query, allowed) -> list[str]:
    """Sentences for the names of ``query`` (a QueryDict) that are not ``allowed`` or are repeated."""
    allowed = sorted(allowed)
    problems = [
        f"unknown parameter {name[:60]!r} (allowed: {', '.join(allowed) or 'none'})"
        for name in sorted(set(query) - set(allowed))
    ]
    problems += [
        f"parameter {name!r} given more than once" for name in sorted(query) if len(query.getlist(name)) > 1
    ]
    return problems


def range_problem(values: dict, query) -> str | None:
    """The sentence for ``since`` later than ``until`` (the raw values quoted), else None."""
    since, until = values.get("since"), values.get("until")
    if since is not None and until is not None and since > until:
        return f"since ({query.get('since')}) is later than until ({query.get('until')})"
    return None


def whole_number(raw, *, low: int | None = None, high: int | None = None) -> int:
    """``raw`` as an int when it is 1 to 18 ASCII digits within [low, high]; ValueError with the reason."""
    text = str(raw)
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ValueError(f"must be a whole number written with the digits 0-9, got {text[:40]!r}")
    value = int(text)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"must be between {low} and {high}")
    return value


def category(raw: str) -> str:
    value = str(raw).strip()
    if not re.fullmatch(CATEGORY_PATTERN[1:-1], value) or len(value) > 64:
        raise ValueError(f"not a category name ({CATEGORY_HELP}): {value[:40]!r}")
    return value


def language(raw: str) -> str:
    value = str(raw).strip().lower()
    if value and not re.fullmatch(LANGUAGE_PATTERN[1:-1], value):
        raise ValueError(f"not a language code ({LANGUAGE_HELP}): {value[:40]!r}")
    return value


def organisation(raw: str) -> str:
    value = str(raw).strip()
    if not re.fullmatch(ORGANISATION_PATTERN[1:-1], value):
        raise ValueError(f"not an organisation ({ORGANISATION_HELP}): {value[:40]!r}")
    return value


def licence(raw: str) -> str:
    value = str(raw).strip()
    if not re.fullmatch(LICENCE_PATTERN[1:-1], value):
        raise ValueError(f"not a licence name ({LICENCE_HELP}): {value[:40]!r}")
    return value


def yes_no(raw: str) -> str:
    value = str(raw).strip().lower()
    if value not in YES_NO:
        raise ValueError(f"must be yes or no, got {value[:40]!r}")
    return value


# --- Django forms (the pages) ---------------------------------------------------------------------


class WholeNumberField(forms.IntegerField):
    """forms.IntegerField that takes ASCII digits only (:func:`whole_number`)."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return whole_number(value)
        except ValueError as exc:
            raise FormError(str(exc), code="invalid") from None


class _RuleField(forms.CharField):
    rule = staticmethod(category)

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return value
        try:
            return self.rule(value)
        except ValueError as exc:
            raise FormError(str(exc), code="invalid") from None


class CategoryField(_RuleField):
    rule = staticmethod(category)


class LanguageField(_RuleField):
    rule = staticmethod(language)


class OrganisationField(_RuleField):
    rule = staticmethod(organisation)


class LicenceField(_RuleField):
    rule = staticmethod(licence)


class YesNoField(_RuleField):
    rule = staticmethod(yes_no)


# --- DRF serializers (the API) --------------------------------------------------------------------


class WholeNumberParam(serializers.IntegerField):
    """serializers.IntegerField that takes ASCII digits only (:func:`whole_number`)."""

    def to_internal_value(self, data):
        try:
            value = whole_number(data)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return super().to_internal_value(value)


class _RuleParam(serializers.RegexField):
    """A RegexField (the schema shows the pattern) whose value then goes through the rule."""

    rule = staticmethod(category)
    pattern = CATEGORY_PATTERN

    def __init__(self, **kwargs):
        super().__init__(self.pattern, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            return self.rule(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class CategoryParam(_RuleParam):
    rule = staticmethod(category)
    pattern = CATEGORY_PATTERN

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 64)
        kwargs.setdefault("help_text", CATEGORY_HELP)
        super().__init__(**kwargs)


class LanguageParam(_RuleParam):
    rule = staticmethod(language)
    pattern = LANGUAGE_PATTERN

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 16)
        kwargs.setdefault("help_text", LANGUAGE_HELP)
        super().__init__(**kwargs)


class _FilterParam(_RuleParam):
    """A filter that may be given empty (the board's "All" choice): blank means no filter, as the pages'
    forms read it."""

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and not data.strip():
            return ""
        return super().to_internal_value(data)


class OrganisationParam(_FilterParam):
    rule = staticmethod(organisation)
    pattern = ORGANISATION_PATTERN

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 200)
        kwargs.setdefault("help_text", ORGANISATION_HELP)
        super().__init__(**kwargs)


class LicenceParam(_FilterParam):
    rule = staticmethod(licence)
    pattern = LICENCE_PATTERN

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 100)
        kwargs.setdefault("help_text", LICENCE_HELP)
        super().__init__(**kwargs)


class YesNoParam(_FilterParam):
    rule = staticmethod(yes_no)
    pattern = r"^\s*([Yy][Ee][Ss]|[Nn][Oo])\s*$"

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "yes or no")
        super().__init__(**kwargs)
