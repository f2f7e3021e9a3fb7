"""Query parameters of the REST API, validated one way everywhere: unknown or repeated names are a 400
that says what is allowed, values go through a DRF serializer."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError

PAGING_PARAMS = frozenset({"limit", "offset", "format"})
UNPAGED_PARAMS = frozenset({"format"})


def validated_query(request, serializer_class, *, drop_blank: bool = False, paged: bool = True) -> dict:
    """The request's query parameters validated by ``serializer_class`` (and ``format``; ``limit`` and
    ``offset`` where the answer is a page: ``paged=False`` for one object or a whole table, where they
    were accepted with any value and ignored); values that are None, and with ``drop_blank`` empty
    strings, are left out."""
    allowed = set(serializer_class().fields) | (PAGING_PARAMS if paged else UNPAGED_PARAMS)
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise ValidationError(
            {"detail": f"unknown parameter(s): {', '.join(unknown)}; allowed: {sorted(allowed)}"}
        )
    repeated = sorted(k for k in request.query_params if len(request.query_params.getlist(k)) > 1)
    if repeated:
        raise ValidationError({"detail": f"parameter(s) given more than once: {', '.join(repeated)}"})
    params = serializer_class(data=request.query_params.dict())
    params.is_valid(raise_exception=True)
    empty = (None, "") if drop_blank else (None,)
    values = {k: v for k, v in params.validated_data.items() if v not in empty}
    since, until = values.get("since"), values.get("until")
    if since is not None and until is not None and since > until:
        # An inverted range is a mistake, not an empty page (docs: "Query parameters").
        raise ValidationError(
            {"detail": f"since ({request.query_params.get('since')}) is later than until ({request.query_params.get('until')})"}
        )
    return values
