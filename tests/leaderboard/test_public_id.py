"""Submission public ids: 22 URL-safe characters that a command line takes as they are."""

from __future__ import annotations

import re

from leaderboard.models.submissions import new_public_id


def test_public_ids_never_start_like_an_option():
    ids = {new_public_id() for _ in range(3000)}  # about 90 of 3,000 token_urlsafe ids start with - or _
    assert len(ids) == 3000
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{21}", i) for i in ids)
