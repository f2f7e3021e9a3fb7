"""Settings for the worker processes of tests/leaderboard/test_worker.py: a two-task suite, and
Redis redelivering an unacknowledged task after 5 s (production keeps the one-hour default, which
must exceed the longest evaluation, or a running evaluation would be handed to a second worker)."""

from config.settings.dev import *  # noqa: F403

LEADERBOARD_SUITE_TASKS = [
    {"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 4},
    {"task": "gsm8k", "num_fewshot": 0, "limit": 8},
]
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 5, "unacked_restore_interval": 1}
LEADERBOARD_HEARTBEAT_STALE_S = 2  # the killed worker falls silent: its redelivered task takes over
LEADERBOARD_PROBE_LIMIT = 4  # the memorisation probe of gsm8k: 4 test and 4 train items
