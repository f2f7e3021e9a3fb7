"""Settings shared by every environment.

Everything a deployment changes comes from the environment (see ``config.env``). With no
environment at all Podium runs on one machine: SQLite in ``var/``, a Channels layer on a SQLite
file in ``var/`` (shared by the web and worker processes), and Celery over kombu's filesystem
transport in ``var/broker`` with results in the database (docs/operations.md explains the choice).
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

from config import env as config_env
from config.env import ConfigError, fail
from evalcore.defaults import data_dir

BASE_DIR = Path(__file__).resolve().parents[2]

try:
    VAR_DIR = Path(config_env.env.str("PODIUM_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
    DEBUG = config_env.boolean("DEBUG", default=False)
    SECRET_KEY = config_env.env.str("SECRET_KEY", default="")
    ALLOWED_HOSTS = config_env.string_list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
    DATABASES = {"default": config_env.database("DATABASE_URL", VAR_DIR / "podium.sqlite3")}
    REDIS_URL = config_env.url("REDIS_URL", schemes={"redis", "rediss"})
    CELERY_BROKER_URL = config_env.url(
        "CELERY_BROKER_URL", schemes=config_env.SUPPORTED_BROKER_SCHEMES, default=REDIS_URL
    )
    CELERY_RESULT_BACKEND = config_env.env.str("CELERY_RESULT_BACKEND", default="django-db")
    CELERY_TASK_ALWAYS_EAGER = config_env.boolean("CELERY_TASK_ALWAYS_EAGER", default=False)
    PODIUM_DATA_DIR = data_dir()  # one rule for every entry point (evalcore/defaults.py)
    ARENA_HASH_SALT = config_env.env.str("ARENA_HASH_SALT", default="")
    ARENA_BATTLES_PER_MINUTE = config_env.integer("ARENA_BATTLES_PER_MINUTE", default=12, minimum=1)
    ARENA_VOTES_PER_MINUTE = config_env.integer("ARENA_VOTES_PER_MINUTE", default=30, minimum=1)
    ARENA_IP_MULTIPLIER = config_env.integer("ARENA_IP_MULTIPLIER", default=5, minimum=1)
    # Reverse proxies in front of the web servers that append to X-Forwarded-For (docker/compose.yaml
    # has one). 0: the client is REMOTE_ADDR and the header is ignored, so nobody can forge it.
    TRUSTED_PROXY_COUNT = config_env.integer("TRUSTED_PROXY_COUNT", default=0, minimum=0)
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

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "django_celery_results",
    "axes",
    "arena",
    "leaderboard",
]

MIDDLEWARE = [
    "common.observability.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into a 429 page.
    "axes.middleware.AxesMiddleware",
]
CSRF_FAILURE_VIEW = "common.http.csrf_failure"  # JSON under /arena/ and /api/, Django's page elsewhere

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username from one
# address, further attempts are refused for AXES_COOLOFF_MINUTES. Keyed on both so that nobody can lock
# another person out of their account from elsewhere.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
try:
    AXES_FAILURE_LIMIT = config_env.integer("AXES_FAILURE_LIMIT", default=5, minimum=1)
    _axes_cooloff_minutes = config_env.integer("AXES_COOLOFF_MINUTES", default=15, minimum=1)
except ConfigError as error:
    fail(error)
AXES_COOLOFF_TIME = timedelta(minutes=_axes_cooloff_minutes)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "common.client.client_ip_or_none"
# Failed attempts are what the lockout needs; successful logins are not logged (who logged in from where).
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing folder
MEDIA_ROOT = VAR_DIR / "media"
# WhiteNoise serves static files from the ASGI server itself; in DEBUG it reads the finders directly.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
# their own queues. The debounced refit after each vote is arena.dispatch's; this one catches up.
try:
    _reap_interval_s = float(config_env.integer("PODIUM_REAP_INTERVAL_S", default=60, minimum=1))
    _outbox_interval_s = float(config_env.integer("PODIUM_OUTBOX_INTERVAL_S", default=60, minimum=1))
    CELERY_BEAT_SCHEDULE = {
        "ratings-refit": {
            "task": "arena.tasks.ratings_refit",
            "schedule": float(config_env.integer("PODIUM_REFIT_INTERVAL_S", default=600, minimum=1)),
        },
        # The anomalous-voter test (arena.services.voters.voters_flag): flags go to the review queue.
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
    }
except ConfigError as error:
    fail(error)

# The arena. Limits are per voter session; an IP address (hashed, never stored raw) gets
# ARENA_IP_MULTIPLIER times as many, since several voters can share one address.
ARENA_MAX_PROMPT_CHARS = 4000
ARENA_MAX_TURNS = 4
ARENA_NEW_MODEL_VOTES = 300  # a model with fewer votes than this is sampled more often...
ARENA_NEW_MODEL_BOOST = 3.0  # ...by this factor
ARENA_GENERATION_TIMEOUT_S = 180
ARENA_RATE_WINDOW_S = 60
ARENA_SESSIONS_PER_MINUTE = 60  # new arena sessions (GET /arena/ without one) per address (IPv6: per /64)
# Vote integrity (docs/arena-ratings.md): prompts sent more often than this percentile of prompt counts
# count once in a refit; voters whose votes the fit finds this improbable (p < alpha, at least MIN_VOTES
# counted votes) are flagged for review.
ARENA_DUPLICATE_PERCENTILE = 99.9
ARENA_VOTER_FLAG_ALPHA = 0.01
ARENA_VOTER_FLAG_MIN_VOTES = 20
try:
    # A side still pending or streaming this long after its turn began has lost its worker (the task's
    # hard limit is ARENA_GENERATION_TIMEOUT_S + 90): the reaper (arena.tasks.sides_reap) fails it.
    ARENA_SIDE_STALE_S = config_env.integer("ARENA_SIDE_STALE_S", default=ARENA_GENERATION_TIMEOUT_S + 120, minimum=1)
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

try:
    # HTTP Basic auth sends the password with every request; off unless an operator turns it on.
    API_BASIC_AUTH = config_env.boolean("API_BASIC_AUTH", default=False)
    API_THROTTLE_ANON = config_env.env.str("API_THROTTLE_ANON", default="120/minute")
    API_THROTTLE_USER = config_env.env.str("API_THROTTLE_USER", default="600/minute")
    # POST /api/submissions/: submissions created (201s), and separately refused attempts (4xx but 429).
    API_THROTTLE_SUBMISSIONS = config_env.env.str("API_THROTTLE_SUBMISSIONS", default="30/hour")
    API_THROTTLE_SUBMISSIONS_REFUSED = config_env.env.str("API_THROTTLE_SUBMISSIONS_REFUSED", default="120/hour")
    for _variable, _rate in (("API_THROTTLE_ANON", API_THROTTLE_ANON), ("API_THROTTLE_USER", API_THROTTLE_USER),
                             ("API_THROTTLE_SUBMISSIONS", API_THROTTLE_SUBMISSIONS),
                             ("API_THROTTLE_SUBMISSIONS_REFUSED", API_THROTTLE_SUBMISSIONS_REFUSED)):  # fmt: skip
        if not re.fullmatch(r"[1-9][0-9]{0,8}/(second|minute|hour|day|s|m|h|d)", _rate):
            raise ConfigError(_variable, f"{_rate!r} is not a rate such as 120/minute (per second|minute|hour|day)")
except ConfigError as error:
    fail(error)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Personal API tokens (account page) first: its WWW-Authenticate header makes refusals a 401.
        "leaderboard.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        *(["rest_framework.authentication.BasicAuthentication"] if API_BASIC_AUTH else []),
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": API_THROTTLE_ANON, "user": API_THROTTLE_USER, "submissions": API_THROTTLE_SUBMISSIONS,
        "submissions_refused": API_THROTTLE_SUBMISSIONS_REFUSED,
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": [
        "common.api_input.JSONParser",  # a too-deeply nested body is a 400, not a RecursionError
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.api_input.ContentNegotiation",  # ?format=xml: 400, not 404
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Podium API",
    "DESCRIPTION": "Votes, ratings, benchmark scores and per-sample records, with intervals and protocols.",
    "VERSION": "0.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "common.api_errors.document_errors",
    ],
}

# Observability (docs/operations.md). /metrics: Prometheus text, for a scraper holding METRICS_TOKEN
# (or, with no token, for loopback clients only). Every process writes its samples under
# PODIUM_METRICS_DIR (prometheus_client's multiprocess mode); clear it when the site starts.
# PODIUM_LOG_FORMAT=json: one JSON object per log line, with the request id that follows a battle from
# the view to the workers.
try:
    METRICS_TOKEN = config_env.env.str("METRICS_TOKEN", default="")
    PODIUM_METRICS_DIR = Path(config_env.env.str("PODIUM_METRICS_DIR", default=str(VAR_DIR / "metrics")))
    PODIUM_LOG_FORMAT = config_env.env.str("PODIUM_LOG_FORMAT", default="plain")
    if PODIUM_LOG_FORMAT not in {"plain", "json"}:
        raise ConfigError("PODIUM_LOG_FORMAT", f"{PODIUM_LOG_FORMAT!r} is not one of plain, json")
except ConfigError as error:
    fail(error)
PODIUM_METRICS_DIR.mkdir(parents=True, exist_ok=True)
# prometheus_client reads this when it is first imported (after the settings, in every process).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(PODIUM_METRICS_DIR))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "workers.requestid.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"},
        "json": {"()": "workers.requestid.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": PODIUM_LOG_FORMAT, "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Leaderboard submissions (leaderboard/checkpoints.py validates uploads before anything is queued).
# LEADERBOARD_MODEL_STORE: a folder of checkpoints owners may name instead of uploading ("" = off).
try:
    LEADERBOARD_MODEL_STORE = config_env.env.str("LEADERBOARD_MODEL_STORE", default="")
    LEADERBOARD_MAX_PARAMETERS = config_env.integer("LEADERBOARD_MAX_PARAMETERS", default=15_000_000_000, minimum=1)
    # 20 GiB: a 7B model in bfloat16 (~15 GB) with its tokenizer fits in one upload; larger checkpoints
    # come through the shared model store (LEADERBOARD_MODEL_STORE). See docs/leaderboard.md.
    LEADERBOARD_MAX_UPLOAD_BYTES = config_env.integer("LEADERBOARD_MAX_UPLOAD_BYTES", default=20 << 30, minimum=1)
    LEADERBOARD_MAX_FILES = config_env.integer("LEADERBOARD_MAX_FILES", default=64, minimum=2)
    LEADERBOARD_SUBMISSIONS_PER_WEEK = config_env.integer("LEADERBOARD_SUBMISSIONS_PER_WEEK", default=5, minimum=1)
    LEADERBOARD_PRIVATE_VARIANTS_LIMIT = config_env.integer("LEADERBOARD_PRIVATE_VARIANTS_LIMIT", default=3, minimum=0)
    # The size of each PATCH the browser sends through the resumable upload (tus): a dropped connection
    # costs at most one chunk. docs/uploads.md.
    LEADERBOARD_UPLOAD_CHUNK_BYTES = config_env.integer("LEADERBOARD_UPLOAD_CHUNK_BYTES", default=16 << 20, minimum=1024)
except ConfigError as error:
    fail(error)
LEADERBOARD_ARCHITECTURES = [
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "GPT2LMHeadModel", "GPTNeoXForCausalLM", "Phi3ForCausalLM", "PhiForCausalLM", "GemmaForCausalLM",
    "Gemma2ForCausalLM", "OLMoForCausalLM", "Olmo2ForCausalLM", "StableLmForCausalLM", "FalconForCausalLM",
]  # fmt: skip
# The frozen suite every submission runs; changing the list makes a new version of the suite.
try:
    LEADERBOARD_SUITE_NAME = config_env.env.str("LEADERBOARD_SUITE_NAME", default="podium")
    # JSON list of {"task", "num_fewshot", "limit"}; `make demo` sets a small slice (CPU only).
    LEADERBOARD_SUITE_TASKS = config_env.json_list(
        "LEADERBOARD_SUITE_TASKS", default=[{"task": "gsm8k", "num_fewshot": 5, "limit": 200}]
    )
    # The engine that evaluates submissions: "hf" (transformers) or "vllm" (vLLM's engine, CUDA or CPU
    # build), with engine arguments as a JSON object, e.g. {"kv_cache_gb": 4, "max_num_seqs": 64}
    # (docs/models.md). The protocol of every score records the engine and its arguments.
    LEADERBOARD_EVAL_BACKEND = config_env.choice("LEADERBOARD_EVAL_BACKEND", default="hf", choices=("hf", "vllm"))
    LEADERBOARD_EVAL_BACKEND_ARGS = config_env.json_object("LEADERBOARD_EVAL_BACKEND_ARGS", default={})
    ARENA_REFIT_DEBOUNCE_S = config_env.integer("ARENA_REFIT_DEBOUNCE_S", default=30, minimum=1)
    # The live board (arena.live): a point fit within ARENA_LIVE_DEBOUNCE_S of a vote; a debounced full
    # refit follows votes only while the arena has at most ARENA_REFIT_ON_VOTE_MAX_VOTES counted votes.
    ARENA_LIVE_DEBOUNCE_S = 0.25
    ARENA_REFIT_ON_VOTE_MAX_VOTES = config_env.integer("ARENA_REFIT_ON_VOTE_MAX_VOTES", default=100_000, minimum=0)
    ARENA_REFIT_ROUNDS = config_env.integer("ARENA_REFIT_ROUNDS", default=1000, minimum=10)
    ARENA_REFIT_MIN_VOTES = config_env.integer("ARENA_REFIT_MIN_VOTES", default=10, minimum=1)
    # The refit keeps the votes' decoded columns here between refits and reads only newer votes from
    # PostgreSQL (arena.vote_cache; ~120 bytes a vote); an empty value turns it off.
    _refit_cache = config_env.env.str("ARENA_REFIT_CACHE_DIR", default=str(VAR_DIR / "refit-cache")).strip()
    ARENA_REFIT_CACHE_DIR = Path(_refit_cache) if _refit_cache else None
    # Fewer votes than this (or all wins / all losses): the model is provisional on the board
    # (docs/ratings.md). The same number as the new-model sampling boost by default.
    ARENA_PROVISIONAL_VOTES = config_env.integer("ARENA_PROVISIONAL_VOTES", default=ARENA_NEW_MODEL_VOTES, minimum=0)
    # Battles (prompts, answers, names) appear on /api/battles/ only once a rating snapshot created at
    # least this long after their vote covers them (docs/arena-ratings.md, "Published battles").
    ARENA_PUBLISH_DELAY_S = config_env.integer("ARENA_PUBLISH_DELAY_S", default=86400, minimum=0)
    # The version of the arena's terms (templates/arena/terms.html): voters agree to it before their
    # first message, and a new version asks again. Bump it with every change of the text.
    ARENA_TERMS_VERSION = config_env.env.str("ARENA_TERMS_VERSION", default="2026-12-03").strip()[:40] or "1"
    # Battles whose prompts the moderation step scores at or above this are held back from publication
    # until staff release them (arena/moderation.py, docs/privacy.md).
    ARENA_MODERATION_THRESHOLD = config_env.floating("ARENA_MODERATION_THRESHOLD", default=0.9, minimum=0.0, maximum=1.0)
    # Where the staff button (and arena_release without --out) writes data releases (docs/privacy.md).
    ARENA_RELEASES_DIR = Path(config_env.env.str("ARENA_RELEASES_DIR", default=str(VAR_DIR / "releases")).strip() or VAR_DIR / "releases")
except ConfigError as error:
    fail(error)
# Contamination checks of submissions (docs/contamination.md, "On the site").
try:
    # Items per split the memorisation probe reads on each suite task that has a training split (0 = off).
    LEADERBOARD_PROBE_LIMIT = config_env.integer("LEADERBOARD_PROBE_LIMIT", default=100, minimum=0)
    # Flag for review when the lower bound of the probe's test - train difference exceeds this.
    LEADERBOARD_PROBE_FLAG_DIFF_LOW = config_env.floating("LEADERBOARD_PROBE_FLAG_DIFF_LOW", default=0.0,
                                                          minimum=-1.0, maximum=1.0)  # fmt: skip
    # Flag for review when a scan flags more than this share of a task's evaluated items.
    LEADERBOARD_SCAN_FLAG_SHARE = config_env.floating("LEADERBOARD_SCAN_FLAG_SHARE", default=0.05,
                                                      minimum=0.0, maximum=1.0)  # fmt: skip
    LEADERBOARD_SCAN_NGRAM = config_env.integer("LEADERBOARD_SCAN_NGRAM", default=13, minimum=8)
    if LEADERBOARD_SCAN_NGRAM > 13:
        raise ConfigError("LEADERBOARD_SCAN_NGRAM", f"must be at most 13, got {LEADERBOARD_SCAN_NGRAM}")
    # Declared training data that may come with one submission (all files together), within the upload limit.
    LEADERBOARD_TRAINING_DATA_MAX_BYTES = config_env.integer(
        "LEADERBOARD_TRAINING_DATA_MAX_BYTES", default=2 << 30, minimum=1
    )
except ConfigError as error:
    fail(error)
LEADERBOARD_TRAINING_DATA_DIR = MEDIA_ROOT / "training-data"  # declared training data, one folder per submission
LEADERBOARD_SCAN_MAX_LINE_BYTES = 4 << 20  # a longer corpus line is skipped and counted (line_too_long)
LEADERBOARD_TASK_PATHS: list[str] = []  # extra task folders (evalcore include paths)
LEADERBOARD_TASK_PATHS: list[str] = []  # extra task folders (evalcore include paths); their Python never runs
# The operator's own task folders whose Python beside the YAML (`!function`, the harness's utils.py) runs on the
# workers, in evaluation and re-scoring, like the bundled tasks'. Never a folder anyone else can write to.
LEADERBOARD_TRUSTED_TASK_PATHS: list[str] = []
LEADERBOARD_SUBMISSIONS_DIR = MEDIA_ROOT / "submissions"
# Resumable (tus) uploads land here, one folder per draft, then move into LEADERBOARD_SUBMISSIONS_DIR
# (keep both on one file system so that move is a rename). See docs/uploads.md.
LEADERBOARD_UPLOADS_DIR = MEDIA_ROOT / "uploads"
try:
    LEADERBOARD_UPLOAD_EXPIRE_S = config_env.integer("LEADERBOARD_UPLOAD_EXPIRE_S", default=86400, minimum=60)
    # Submissions of one owner receiving files at once (each may hold up to LEADERBOARD_MAX_UPLOAD_BYTES).
    LEADERBOARD_UPLOADS_IN_PROGRESS = config_env.integer("LEADERBOARD_UPLOADS_IN_PROGRESS", default=3, minimum=1)
    # Each chunk is on disk (fdatasync) before the server acknowledges it, so the offset a client resumes
    # from survives a crash of this machine. Off: acknowledged from the page cache (faster where a copy in
    # memory is as good as one on disk). docs/uploads.md, "Durable chunks".
    LEADERBOARD_UPLOAD_FSYNC = config_env.boolean("LEADERBOARD_UPLOAD_FSYNC", default=True)
    # A chunk's 4 KiB-aligned blocks go to the disk with direct I/O (O_DIRECT), bypassing the page cache.
    # Off: every block through the page cache (for a file system where direct writes are each a synchronous
    # round trip, as on NFS). docs/uploads.md, "Durable chunks".
    LEADERBOARD_UPLOAD_DIRECT_IO = config_env.boolean("LEADERBOARD_UPLOAD_DIRECT_IO", default=True)
except ConfigError as error:
    fail(error)
LEADERBOARD_REQUEST_CACHE_DIR = VAR_DIR / "request-cache"  # model answers of running submissions (worker-local)
try:
    # The outbox leaves a submission this long to the web process that stored it before sending it itself.
    LEADERBOARD_OUTBOX_GRACE_S = config_env.integer("LEADERBOARD_OUTBOX_GRACE_S", default=30, minimum=0)
except ConfigError as error:
    fail(error)
LEADERBOARD_HEARTBEAT_STALE_S = 600  # a RUNNING submission silent this long is taken over by a redelivered task
DATA_UPLOAD_MAX_NUMBER_FILES = LEADERBOARD_MAX_FILES
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024  # anything larger goes to a temporary file, never to memory
# Mail: owners hear when their submission's evaluation finishes or fails. The default prints mails on
# the worker's console (the demo); set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and
# EMAIL_HOST etc. to send them. PODIUM_SITE_URL makes the links in them absolute.
try:
    EMAIL_BACKEND = config_env.env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
    EMAIL_HOST = config_env.env.str("EMAIL_HOST", default="localhost")
    EMAIL_PORT = config_env.integer("EMAIL_PORT", default=25, minimum=1)
    EMAIL_HOST_USER = config_env.env.str("EMAIL_HOST_USER", default="")
    EMAIL_HOST_PASSWORD = config_env.env.str("EMAIL_HOST_PASSWORD", default="")
    EMAIL_USE_TLS = config_env.boolean("EMAIL_USE_TLS", default=False)
    EMAIL_TIMEOUT = config_env.integer("EMAIL_TIMEOUT", default=30, minimum=1)
    DEFAULT_FROM_EMAIL = config_env.env.str("DEFAULT_FROM_EMAIL", default="Podium <podium@localhost>")
    PODIUM_SITE_URL = config_env.url("PODIUM_SITE_URL", schemes={"http", "https"}, default="http://127.0.0.1:8000")
except ConfigError as error:
    fail(error)
LOGIN_URL = "leaderboard:login"
LOGIN_REDIRECT_URL = "leaderboard:submissions"
LOGOUT_REDIRECT_URL = "home"
