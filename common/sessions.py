"""Sessions read from the cache and written through to the database, that outlive the cache going down.

Django's ``cached_db`` engine already falls back to the database when a cache read fails, but then
writes the session back to the cache unguarded, and ``exists`` and ``delete`` ask the cache first: with
Redis down every request that reads a session would fail. Here every cache step is best effort, so the
arena keeps voting on database sessions while Redis restarts (docs/operations.md, "Faults").
"""

from __future__ import annotations

import logging

from django.contrib.sessions.backends import cached_db, db

log = logging.getLogger(__name__)


class SessionStore(cached_db.SessionStore):
    def load(self):
        try:
            return super().load()
        except (ConnectionError, OSError, TimeoutError) as exc:
            return self._load_from_database(exc)
        except Exception as exc:  # redis-py's own errors do not derive from the builtin ones
            if type(exc).__module__.startswith("redis"):
                return self._load_from_database(exc)
            raise

    def _load_from_database(self, exc: Exception) -> dict:
        log.warning("session cache unavailable (%r): reading the session from the database", exc)
        stored = self._get_session_from_db()
        return self.decode(stored.session_data) if stored else {}

    def exists(self, session_key):
        try:
            return super().exists(session_key)
        except Exception as exc:  # noqa: BLE001 - the cache is down: the database knows
            log.warning("session cache unavailable (%r)", exc)
            return db.SessionStore.exists(self, session_key)

    def delete(self, session_key=None):
        try:
            super().delete(session_key)
        except Exception as exc:  # noqa: BLE001 - the cache is down: delete the row, the cache entry expires
            log.warning("session cache unavailable (%r): deleting the session row only", exc)
            db.SessionStore.delete(self, session_key)
