"""evalcore's :class:`~evalcore.judging.cache.JudgmentStore` over database rows.

Keys are ``judgment:<judge key>:<protocol sha256>:<prompt sha256>`` (built by
:class:`evalcore.judging.JudgmentCache`), so any run of the same judge under the same protocol on the
same prompt finds the verdict already computed, whichever worker computed it.
"""

from __future__ import annotations

from collections.abc import Sequence

from leaderboard.models import JudgmentCacheEntry

CHUNK = 500


class DatabaseStore:
    """``get_many`` / ``put_many`` on :class:`leaderboard.models.JudgmentCacheEntry`."""

    def get_many(self, keys: Sequence[str]) -> dict[str, dict]:
        keys = list(keys)
        out: dict[str, dict] = {}
        for start in range(0, len(keys), CHUNK):
            rows = JudgmentCacheEntry.objects.filter(key__in=keys[start : start + CHUNK]).values_list("key", "value")
            out.update({key: dict(value) for key, value in rows})
        return out

    def put_many(self, items: dict[str, dict]) -> None:
        rows = [JudgmentCacheEntry(key=key, value=value) for key, value in items.items()]
        JudgmentCacheEntry.objects.bulk_create(rows, batch_size=CHUNK, update_conflicts=True, unique_fields=["key"],
                                               update_fields=["value"])  # fmt: skip
