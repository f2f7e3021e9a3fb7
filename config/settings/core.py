"""Where Podium runs: its folders, debug mode, secret key, allowed hosts and the database.

Every other settings module may use these (:mod:`config.settings.base` gathers them all).
"""

from __future__ import annotations

from pathlib import Path

from config import env as config_env
from config.env import ConfigError, fail
from evalcore.boundary.defaults import data_dir

BASE_DIR = Path(__file__).resolve().parents[2]

try:
    VAR_DIR = Path(config_env.env.str("PODIUM_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
    DEBUG = config_env.boolean("DEBUG", default=False)
    SECRET_KEY = config_env.env.str("SECRET_KEY", default="")
    ALLOWED_HOSTS = config_env.string_list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
    DATABASES = {"default": config_env.database("DATABASE_URL", VAR_DIR / "podium.sqlite3")}
    REDIS_URL = config_env.url("REDIS_URL", schemes={"redis", "rediss"})
    PODIUM_DATA_DIR = data_dir()  # one rule for every entry point (evalcore/boundary/defaults.py)
    PODIUM_MODELS_DIR = Path(config_env.env.str("PODIUM_MODELS_DIR", default=str(VAR_DIR / "models")))
except ConfigError as error:
    fail(error)

DATABASES["default"].setdefault("ATOMIC_REQUESTS", False)
DATABASES["default"].setdefault("CONN_MAX_AGE", 0)
try:
    # A psycopg connection pool per web process (PostgreSQL only): without it every request opens a
    # new connection. Off by default so Celery's forked worker processes never share a pool's sockets.
    DATABASE_POOL_SIZE = config_env.integer("DATABASE_POOL_SIZE", default=0, minimum=0)
except ConfigError as error:
    fail(error)
if DATABASE_POOL_SIZE and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": DATABASE_POOL_SIZE}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Several processes (web, worker) share the file: wait for locks rather than fail at once. WAL lets
    # readers go on while a worker writes; IMMEDIATE transactions take the write lock up front, so two
    # writers queue instead of one failing with "database is locked" when it upgrades a read lock.
    _sqlite_options = DATABASES["default"].setdefault("OPTIONS", {})
    _sqlite_options.setdefault("timeout", 20)
    _sqlite_options.setdefault("transaction_mode", "IMMEDIATE")
    _sqlite_options.setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
