"""Query parameters of the REST API, by the rules of common.query (the pages use the same through
leaderboard.query_forms): unknown or repeated names are a 400 that says what is allowed, values go
through a DRF serializer, an inverted since/until range is a 400 naming both."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

from common.query import query_problems, range_problem, whole_number

PAGING_PARAMS = frozenset({"limit", "offset", "format"})
UNPAGED_PARAMS = frozenset({"format"})


def validated_query(request, serializer_class, *, drop_blank: bool = False, paged: bool = True) -> dict:
    """The request's query parameters validated by ``serializer_class`` (and ``format``; ``limit`` and
    ``offset`` where the answer is a page: ``paged=False`` for one object or a whole table, where they
    were accepted with any value and ignored); values that are None, and with ``drop_blank`` empty
    strings, are left out."""
    allowed = set(serializer_class().fields) | (PAGING_PARAMS if paged else UNPAGED_PARAMS)
    problems = query_problems(request.query_params, allowed)
    if problems:
        raise ValidationError({"detail": "; ".join(problems)})
    params = serializer_class(data=request.query_params.dict())
    params.is_valid(raise_exception=True)
    empty = (None, "") if drop_blank else (None,)
    values = {k: v for k, v in params.validated_data.items() if v not in empty}
    inverted = range_problem(values, request.query_params)  # a mistake, not an empty page
    if inverted:
        raise ValidationError({"detail": inverted})
    return values


MAX_LIMIT = 1000


MAX_OFFSET = 10**9


def _int_param(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return whole_number(raw, low=low, high=high)  # ASCII digits only (common.query)
    except ValueError as exc:
        raise ValidationError({name: str(exc)}) from None


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """Limit/offset paging that refuses bad or oversized values instead of silently clamping them."""

    default_limit = 100
    max_limit = MAX_LIMIT

    def get_limit(self, request):
        return _int_param(request, "limit", self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return _int_param(request, "offset", 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view):
        """The documented parameters carry the bounds the server enforces."""
        bounds = {"limit": (1, self.max_limit), "offset": (0, MAX_OFFSET)}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
        return parameters
