"""How the API reads what a client sends: JSON bodies and the ``format`` parameter.

- A JSON body nested deeper than Python's recursion limit made ``json.loads`` raise RecursionError
  (an HTTP 500 page); it is now a 400 that says so, like any other malformed body.
- ``?format=xml`` made DRF answer 404 "Not found." as if the object were missing; it is now a 400
  naming the formats the endpoint serves.
"""

from __future__ import annotations

from rest_framework import exceptions, negotiation, parsers


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with a too-deeply nested body refused as a parse error (400)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - the body is nested too deeply") from None


class ContentNegotiation(negotiation.DefaultContentNegotiation):
    """DRF's negotiation, with an unknown ``?format=`` answered 400 (DRF raises Http404)."""

    def filter_renderers(self, renderers, format):
        found = [renderer for renderer in renderers if renderer.format == format]
        if not found:
            served = ", ".join(sorted({renderer.format for renderer in renderers}))
            raise exceptions.ValidationError(
                {"format": [f"{str(format)[:40]!r} is not served here; use one of: {served}"]}
            )
        return found
