"""The REST API: authentication, throttling, parsing, pagination and the OpenAPI schema."""

from __future__ import annotations

import re

from config import env as config_env
from config.env import ConfigError, fail

try:
    # HTTP Basic auth sends the password with every request; off unless an operator turns it on.
    API_BASIC_AUTH = config_env.boolean("API_BASIC_AUTH", default=False)
    API_THROTTLE_ANON = config_env.env.str("API_THROTTLE_ANON", default="120/minute")
    API_THROTTLE_USER = config_env.env.str("API_THROTTLE_USER", default="600/minute")
    # POST /api/submissions/: submissions created (201s), and separately refused attempts (4xx but 429).
    API_THROTTLE_SUBMISSIONS = config_env.env.str("API_THROTTLE_SUBMISSIONS", default="30/hour")
    API_THROTTLE_SUBMISSIONS_REFUSED = config_env.env.str("API_THROTTLE_SUBMISSIONS_REFUSED", default="120/hour")
    for _variable, _rate in (("API_THROTTLE_ANON", API_THROTTLE_ANON), ("API_THROTTLE_USER", API_THROTTLE_USER),
                             ("API_THROTTLE_SUBMISSIONS", API_THROTTLE_SUBMISSIONS),
                             ("API_THROTTLE_SUBMISSIONS_REFUSED", API_THROTTLE_SUBMISSIONS_REFUSED)):  # fmt: skip
        if not re.fullmatch(r"[1-9][0-9]{0,8}/(second|minute|hour|day|s|m|h|d)", _rate):
            raise ConfigError(_variable, f"{_rate!r} is not a rate such as 120/minute (per second|minute|hour|day)")
except ConfigError as error:
    fail(error)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Personal API tokens (account page) first: its WWW-Authenticate header makes refusals a 401.
        "leaderboard.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        *(["rest_framework.authentication.BasicAuthentication"] if API_BASIC_AUTH else []),
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": API_THROTTLE_ANON, "user": API_THROTTLE_USER, "submissions": API_THROTTLE_SUBMISSIONS,
        "submissions_refused": API_THROTTLE_SUBMISSIONS_REFUSED,
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": [
        "common.api_input.JSONParser",  # a too-deeply nested body is a 400, not a RecursionError
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.api_input.ContentNegotiation",  # ?format=xml: 400, not 404
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Podium API",
    "DESCRIPTION": "Votes, ratings, benchmark scores and per-sample records, with intervals and protocols.",
    "VERSION": "0.1.0",
    # /api/docs/ (Swagger UI) loads its scripts from drf-spectacular-sidecar's static files, served by the
    # site itself: the documentation works offline, no CDN is asked.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "common.api_errors.document_errors",
    ],
}
