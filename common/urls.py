"""URL helpers shared by settings, health probes and logs."""

from __future__ import annotations

import re
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


WITHHELD = "(address withheld)"
_URL_TAIL = r"(?::\d+)?(?:/(?:[^\s\"'<>()\[\],;]*[^\s\"'<>()\[\],;.:])?)?"  # a sentence's full stop is not the path's


def addresses_withheld(value, urls):
    """``value`` (text, or lists and dicts of it, as JSON holds them) with every mention of the hosts of
    ``urls`` replaced by :data:`WITHHELD`: a whole URL on such a host (scheme, credentials, port and
    path included), or the host name alone (an error message may name it bare). What the public may read
    of a protocol that names a server: that there was one, not where (internal host names stay inside).
    Keys are kept; numbers and anything else are returned as they are."""
    hosts = sorted({h for h in (_host(u) for u in urls) if h}, key=len, reverse=True)
    if not hosts:
        return value
    names = "|".join(re.escape(h) for h in hosts)
    pattern = re.compile(rf"(?:[a-z][a-z0-9+.-]*://(?:[^\s/@]*@)?)?\[?(?:{names})\]?{_URL_TAIL}", re.IGNORECASE)
    return _replace(value, pattern)


def _host(url) -> str:
    try:
        return (urlsplit(str(url).strip()).hostname or "") if url else ""
    except ValueError:
        return ""


def _replace(value, pattern: re.Pattern):
    if isinstance(value, str):
        return pattern.sub(WITHHELD, value)
    if isinstance(value, dict):
        return {key: _replace(item, pattern) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace(item, pattern) for item in value]
    return value
