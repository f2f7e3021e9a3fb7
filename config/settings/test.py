"""Test settings: the suite runs against PostgreSQL, Redis and RabbitMQ named by TEST_DATABASE_URL,
TEST_REDIS_URL and TEST_RABBITMQ_URL (``make test`` finds or starts them). Without them it falls back to the
environment's DATABASE_URL or SQLite, so a single evalcore test runs anywhere."""

import os
import tempfile

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.base import *  # noqa: F403

try:
    _test_db = config_env.env.str("TEST_DATABASE_URL", default="").strip()
    if _test_db:
        DATABASES = {"default": config_env.database("TEST_DATABASE_URL", VAR_DIR / "test.sqlite3")}  # noqa: F405
    TEST_REDIS_URL = config_env.url("TEST_REDIS_URL", schemes={"redis", "rediss"})
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
    "DEFAULT_THROTTLE_RATES": {"anon": "100000/minute", "user": "100000/minute", "submissions": "100000/minute"},
}

# Metrics of this test run (and of the servers and workers it starts, which inherit the variable) in a
# folder of its own, not var/metrics, so concurrent runs never add up each other's samples.
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
