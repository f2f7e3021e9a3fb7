"""Checks of an endpoint backend's model arguments (``openai``, ``openai-chat``): each bad value is a
ValueError that names the argument and says what it must be."""

from __future__ import annotations

import os
import urllib.parse


def as_bool(value, name: str) -> bool:
    """A boolean model argument: a bool, or the strings true/false/1/0/yes/no."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def as_number(value, name: str, kind: type):
    """A numeric model argument (a number or its text); booleans are refused."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        number = kind(value)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {what} (timeout and backoff numbers, max_retries and "
                         f"concurrency integers), got {value!r}") from None  # fmt: skip
    if kind is int and isinstance(value, float) and value != number:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return number


def check_base_url(base_url) -> str:
    """Refuse a base_url that is not a plain http(s) API root; return its host."""
    parts = urllib.parse.urlsplit(str(base_url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url {base_url!r} must be an http(s) URL such as http://127.0.0.1:8000/v1")
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; use api_key_env=NAME")
    if parts.query or parts.fragment:
        raise ValueError(f"base_url {base_url!r} must not have a query or fragment")
    return parts.hostname


def check_key_env(name: str, base_url: str, *, plain_remote: bool, insecure: bool) -> None:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"api_key_env must be an environment variable name, got {name!r}")
    if not os.environ.get(name):
        raise ValueError(f"api_key_env names {name!r}, which is not set in the environment")
    if plain_remote and not insecure:
        raise ValueError(
            f"base_url {base_url!r} is plain http to another host: the API key would cross the "
            "network unencrypted; use https, or pass insecure_http=true for a trusted private network"
        )
