"""DRF authentication by personal API token (``Authorization: Bearer pdm_...``)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from leaderboard.accounts import tokens


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """A personal API token made on the account page; a revoked one is refused with that reason."""

    def authenticate(self, request):
        raw = tokens.bearer(request.META.get("HTTP_AUTHORIZATION", ""))
        if raw is None:
            return None
        try:
            return tokens.token_user(raw), raw
        except tokens.TokenError as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "leaderboard.accounts.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal API token (account page)."}
