"""How Podium's processes reach each other: the Channels layer, Celery (broker, results, beat) and the cache.

With REDIS_URL each is Redis; without it, files under ``var/`` that the web and worker processes share
(docs/operations.md explains the choice).
"""

from __future__ import annotations

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.core import REDIS_URL, VAR_DIR

try:
    CELERY_BROKER_URL = config_env.url(
        "CELERY_BROKER_URL", schemes=config_env.SUPPORTED_BROKER_SCHEMES, default=REDIS_URL
    )
    CELERY_RESULT_BACKEND = config_env.env.str("CELERY_RESULT_BACKEND", default="django-db")
    CELERY_TASK_ALWAYS_EAGER = config_env.boolean("CELERY_TASK_ALWAYS_EAGER", default=False)
except ConfigError as error:
    fail(error)

# Channels: Redis when REDIS_URL is set, else a SQLite file shared by the web and worker processes
# (config.channel_layer; the in-memory layer cannot carry answers from a worker to a browser).
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "config.channel_layer.SQLiteChannelLayer",
            "CONFIG": {"path": str(VAR_DIR / "channels.sqlite3")},
        }
    }

# Celery (read by workers.celery with namespace CELERY_). Without a broker URL, kombu's filesystem
# transport under var/broker: no server, survives restarts, visible as plain files.
CELERY_BROKER_DIR = VAR_DIR / "broker"
if not CELERY_BROKER_URL:
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "store_processed": False,
    }
CELERY_RESULT_EXTENDED = True
CELERY_TASK_TRACK_STARTED = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Periodic work (celery beat), named here because settings sit above every app; the tasks declare
# their own queues. The debounced refit after each vote is arena.play.dispatch's; this one catches up.
try:
    _reap_interval_s = float(config_env.integer("PODIUM_REAP_INTERVAL_S", default=60, minimum=1))
    _outbox_interval_s = float(config_env.integer("PODIUM_OUTBOX_INTERVAL_S", default=60, minimum=1))
    CELERY_BEAT_SCHEDULE = {
        "ratings-refit": {
            "task": "arena.tasks.ratings_refit",
            "schedule": float(config_env.integer("PODIUM_REFIT_INTERVAL_S", default=600, minimum=1)),
        },
        # The anomalous-voter test (arena.votes.voters.voters_flag): flags go to the review queue.
        "voters-flag": {
            "task": "arena.tasks.voters_flag",
            "schedule": float(config_env.integer("PODIUM_VOTER_FLAG_INTERVAL_S", default=3600, minimum=1)),
        },
        # Battle sides no worker answered (a worker killed mid-generation): failed, never "answering" forever.
        "arena-sides-reap": {
            "task": "arena.tasks.sides_reap",
            "schedule": _reap_interval_s,
            "options": {"expires": _reap_interval_s},  # one waiting behind a busy worker is enough
        },
        # Submissions stored while the broker was down: sent once it is back (the outbox).
        "submissions-dispatch-pending": {
            "task": "leaderboard.tasks.submissions_dispatch_pending",
            "schedule": _outbox_interval_s,
            "options": {"expires": _outbox_interval_s},
        },
        # Resumable uploads nobody touched for LEADERBOARD_UPLOAD_EXPIRE_S: their bytes are removed.
        "uploads-expire": {"task": "leaderboard.tasks.uploads_expire", "schedule": 3600.0},
        # Votes whose first prompt no tagging run took (a lost task): tagged (docs/categories.md).
        "categories-tag": {
            "task": "arena.tasks.categories_tag",
            "schedule": float(config_env.integer("PODIUM_CATEGORY_INTERVAL_S", default=600, minimum=1)),
            "options": {"queue": "judge"},
        },
    }
except ConfigError as error:
    fail(error)

# Caches hold rate-limit counters and the refit debounce: Redis when configured, else per process.
# With Redis, sessions are read from the cache and written through to the database (a vote costs one
# Redis GET instead of a SQL query; a cache flush loses no session).
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    SESSION_ENGINE = "common.sessions"  # cached_db that keeps working while Redis is down
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }
