"""Test settings: the suite runs against PostgreSQL, Redis and RabbitMQ named by TEST_DATABASE_URL,
TEST_REDIS_URL and TEST_RABBITMQ_URL (``make test`` finds or starts them). Without them it falls back to the
environment's DATABASE_URL or SQLite, so a single evalcore test runs anywhere."""

import os
import tempfile
from urllib.parse import urlsplit, urlunsplit

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.base import *  # noqa: F403

# Under pytest-xdist (`make test` runs the suite in PYTEST_WORKERS processes) each worker process is
# "gw0", "gw1"...: pytest-django gives each its own test database, and below each gets its own Redis
# database and temporary folders. Servers and workers a test starts inherit the variable and so the
# same ones.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_XDIST_INDEX = int(_XDIST_WORKER[2:]) if _XDIST_WORKER.startswith("gw") and _XDIST_WORKER[2:].isdigit() else 0


def _worker_redis_url(url: str) -> str:
    """TEST_REDIS_URL with its database number moved on by this xdist worker's index (Redis has 16),
    so two workers' Celery queues and keys never meet."""
    if not url or not _XDIST_INDEX:
        return url
    parts = urlsplit(url)
    base = parts.path.strip("/")
    number = (int(base) if base.isdigit() else 0) + _XDIST_INDEX
    if number > 15:
        fail(ConfigError(f"TEST_REDIS_URL: database {base or 0} + xdist worker {_XDIST_INDEX} is past Redis's 15"))
    return urlunsplit(parts._replace(path=f"/{number}"))


try:
    _test_db = config_env.env.str("TEST_DATABASE_URL", default="").strip()
    if _test_db:
        DATABASES = {"default": config_env.database("TEST_DATABASE_URL", VAR_DIR / "test.sqlite3")}  # noqa: F405
    TEST_REDIS_URL = _worker_redis_url(config_env.url("TEST_REDIS_URL", schemes={"redis", "rediss"}))
    TEST_RABBITMQ_URL = config_env.url("TEST_RABBITMQ_URL", schemes={"amqp", "pyamqp"})
except ConfigError as error:
    fail(error)

DEBUG = False
SECRET_KEY = "test-only-podium-key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests that need a broker or a channel layer start their own processes with explicit URLs;
# in-process code uses the in-memory layer unless a test overrides it.
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# The suite calls the API far more often than a person would; tests/test_security_settings.py
# checks the throttle with its own low rate.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"anon": "100000/minute", "user": "100000/minute", "submissions": "100000/minute",
                               "submissions_refused": "100000/minute"},
}

# Metrics of this test run (and of the servers and workers it starts, which inherit the variable) in a
# folder of its own, not var/metrics, so concurrent runs never add up each other's samples.
if _XDIST_WORKER and os.environ.get("PODIUM_TEST_WORKER_DIRS") != _XDIST_WORKER:  # a new xdist worker: folders of its own
    for _name in ("PODIUM_TEST_METRICS_DIR", "ARENA_REFIT_CACHE_DIR"):
        os.environ.pop(_name, None)
    os.environ["PODIUM_TEST_WORKER_DIRS"] = _XDIST_WORKER
os.environ.setdefault("PODIUM_TEST_METRICS_DIR", tempfile.mkdtemp(prefix="podium-metrics-"))
os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["PODIUM_TEST_METRICS_DIR"]
# The refit cache of this test run (and of the workers it starts) in a folder of its own.
os.environ.setdefault("ARENA_REFIT_CACHE_DIR", tempfile.mkdtemp(prefix="podium-refit-cache-"))
ARENA_REFIT_CACHE_DIR = Path(os.environ["ARENA_REFIT_CACHE_DIR"]) if os.environ["ARENA_REFIT_CACHE_DIR"].strip() else None  # noqa: F405
LEADERBOARD_PROBE_LIMIT = 4  # the memorisation probe reads 4 test and 4 train items in tests
# Tasks this test run's own process enqueues on the embedded broker go to a folder of its own: under
# var/broker they would wait there for the next `make demo`, whose worker would run them against its
# database (seen: battle_generate tasks failing on turns that do not exist).
if CELERY_BROKER_URL == "filesystem://":  # noqa: F405
    CELERY_BROKER_DIR = Path(tempfile.mkdtemp(prefix="podium-test-broker-"))  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        **{key: str(CELERY_BROKER_DIR / name) for key, name in (
            ("data_folder_in", "queue"), ("data_folder_out", "queue"), ("control_folder", "control"),
            ("processed_folder", "processed"))},
    }  # fmt: skip
