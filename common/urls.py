"""URL helpers shared by settings, health probes and logs."""

from __future__ import annotations

from urllib.parse import urlsplit


def redact(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for logs and /healthz)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable>"
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url
