"""Refit requests: a committed vote asks for a (debounced) ratings refit."""

from __future__ import annotations

import time

from arena.dispatch import ratings_refit_schedule

# A process that saw a refit pending skips asking again for this long: the pending refit starts at
# least a second after its marker expires, so it still covers every vote committed meanwhile.
REFIT_RECHECK_S = 0.5
_refit_recheck_after = 0.0


def refit_request() -> None:
    """Ask for a ratings refit; call once the vote has committed. Never raises (see
    :func:`arena.dispatch.ratings_refit_schedule`)."""
    global _refit_recheck_after
    now = time.monotonic()
    if now < _refit_recheck_after:
        return
    ratings_refit_schedule()
    _refit_recheck_after = now + REFIT_RECHECK_S
