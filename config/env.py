"""Reading settings from the environment, with one clear line on bad input.

Settings modules call these helpers at import time. A malformed value stops start-up with a
single line that names the variable (no traceback), because a traceback from inside Django's
settings machinery hides which variable was wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

import environ

from common.urls import redact

env = environ.Env()

SUPPORTED_DATABASE_SCHEMES = {"sqlite", "postgres", "postgresql", "pgsql", "psql"}
SUPPORTED_BROKER_SCHEMES = {"redis", "rediss", "amqp", "pyamqp", "filesystem", "memory", "sqla+sqlite"}


class ConfigError(Exception):
    """A setting read from the environment is missing or malformed."""

    def __init__(self, variable: str, problem: str):
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


def fail(error: ConfigError) -> None:
    """Print one line naming the variable and exit with status 2."""
    sys.stderr.write(f"podium: configuration error: {error}\n")
    raise SystemExit(2)


def _check_url(variable: str, value: str, schemes: set[str]) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a non-numeric port
    except ValueError as exc:
        raise ConfigError(variable, f"cannot parse {redact(value)!r} ({exc})") from None
    if not parts.scheme:
        raise ConfigError(variable, f"{redact(value)!r} has no scheme; expected e.g. postgres://user@host/db")
    if parts.scheme not in schemes:
        raise ConfigError(
            variable, f"unsupported scheme {parts.scheme!r} in {redact(value)!r}; use one of {sorted(schemes)}"
        )
    return value


def database(variable: str, default_sqlite_path: Path) -> dict:
    """Django DATABASES['default'] from ``variable`` (a URL), or SQLite at the default path."""
    value = env.str(variable, default="").strip()
    if not value:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(default_sqlite_path)}
    _check_url(variable, value, SUPPORTED_DATABASE_SCHEMES)
    try:
        config = environ.Env.db_url_config(value)
    except Exception as exc:  # django-environ raises several types for bad URLs
        raise ConfigError(variable, f"cannot parse {redact(value)!r} ({exc})") from None
    if config.get("ENGINE", "").endswith("postgresql") and not config.get("NAME"):
        raise ConfigError(variable, f"{redact(value)!r} names no database (postgres://user@host:5432/NAME)")
    return config


def url(variable: str, *, schemes: set[str], default: str = "") -> str:
    """A URL setting, checked for a supported scheme; empty when unset and no default."""
    value = env.str(variable, default=default).strip()
    if not value:
        return ""
    return _check_url(variable, value, schemes)


def boolean(variable: str, *, default: bool) -> bool:
    raw = env.str(variable, default="").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(variable, f"expected true/false, got {raw!r}")


def integer(variable: str, *, default: int, minimum: int | None = None) -> int:
    raw = env.str(variable, default="").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(variable, f"expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(variable, f"must be at least {minimum}, got {value}")
    return value


def floating(variable: str, *, default: float, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite number setting, within [minimum, maximum] when given."""
    raw = env.str(variable, default="").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(variable, f"expected a number, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(variable, f"expected a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(variable, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(variable, f"must be at most {maximum}, got {value}")
    return value


def string_list(variable: str, *, default: list[str]) -> list[str]:
    raw = env.str(variable, default="").strip()
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def json_list(variable: str, *, default: list) -> list:
    """A JSON list setting (for example a list of task dicts); the default when unset."""
    return _json_value(variable, default, list)


def json_object(variable: str, *, default: dict) -> dict:
    """A JSON object setting (for example engine arguments); the default when unset."""
    return _json_value(variable, default, dict)


def choice(variable: str, *, default: str, choices: tuple[str, ...]) -> str:
    value = env.str(variable, default=default).strip() or default
    if value not in choices:
        raise ConfigError(variable, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _json_value(variable: str, default, kind: type):
    raw = env.str(variable, default="").strip()
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" ({exc.msg} at character {exc.pos})" if isinstance(exc, json.JSONDecodeError) else " (nested too deep)"
        raise ConfigError(variable, f"not valid JSON{where}") from None
    if not isinstance(value, kind):
        raise ConfigError(variable, f"expected a JSON {'list' if kind is list else 'object'}, got {type(value).__name__}")
    return value
