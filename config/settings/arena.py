"""The arena: voters' rate limits, battles, vote integrity, the refit and the live board, publication.

See docs/arena-ratings.md and docs/privacy.md for what each setting governs.
"""

from __future__ import annotations

from pathlib import Path

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.core import VAR_DIR
from evalcore.categories.protocol import load_category_protocol as _load_category_protocol

# The arena. Limits are per voter session; an IP address (hashed, never stored raw) gets
# ARENA_IP_MULTIPLIER times as many, since several voters can share one address.
try:
    ARENA_HASH_SALT = config_env.env.str("ARENA_HASH_SALT", default="")
    ARENA_BATTLES_PER_MINUTE = config_env.integer("ARENA_BATTLES_PER_MINUTE", default=12, minimum=1)
    ARENA_VOTES_PER_MINUTE = config_env.integer("ARENA_VOTES_PER_MINUTE", default=30, minimum=1)
    ARENA_IP_MULTIPLIER = config_env.integer("ARENA_IP_MULTIPLIER", default=5, minimum=1)
except ConfigError as error:
    fail(error)
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
    # A worker serving a generate queue loads its arena models as it starts (arena.tasks), so the first
    # battle does not wait for a load; make demo's arena worker and compose's worker-arena turn it on.
    ARENA_WORKER_PRELOAD = config_env.boolean("ARENA_WORKER_PRELOAD", default=False)
except ConfigError as error:
    fail(error)

# Refits, the live board, the terms, moderation and data releases.
try:
    ARENA_REFIT_DEBOUNCE_S = config_env.integer("ARENA_REFIT_DEBOUNCE_S", default=30, minimum=1)
    # The live board (arena.ratings.live): a point fit within ARENA_LIVE_DEBOUNCE_S of a vote; a debounced full
    # refit follows votes only while the arena has at most ARENA_REFIT_ON_VOTE_MAX_VOTES counted votes.
    ARENA_LIVE_DEBOUNCE_S = 0.25
    ARENA_REFIT_ON_VOTE_MAX_VOTES = config_env.integer("ARENA_REFIT_ON_VOTE_MAX_VOTES", default=100_000, minimum=0)
    ARENA_REFIT_ROUNDS = config_env.integer("ARENA_REFIT_ROUNDS", default=1000, minimum=10)
    ARENA_REFIT_MIN_VOTES = config_env.integer("ARENA_REFIT_MIN_VOTES", default=10, minimum=1)
    # The refit keeps the votes' decoded columns here between refits and reads only newer votes from
    # PostgreSQL (arena.votes.cache; ~120 bytes a vote); an empty value turns it off.
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
    # until staff release them (arena/publication/moderation.py, docs/privacy.md).
    ARENA_MODERATION_THRESHOLD = config_env.floating("ARENA_MODERATION_THRESHOLD", default=0.9, minimum=0.0, maximum=1.0)
    # Where the staff button (and arena_release without --out) writes data releases (docs/privacy.md).
    ARENA_RELEASES_DIR = Path(config_env.env.str("ARENA_RELEASES_DIR", default=str(VAR_DIR / "releases")).strip() or VAR_DIR / "releases")
except ConfigError as error:
    fail(error)

# The scale and the board's views (issue 31; docs/arena-ratings.md, "The anchor" and "The daily cap").
try:
    # Every rating is shifted so this model sits at ARENA_ANCHOR_RATING (empty: centred on a mean of 1000).
    ARENA_ANCHOR_MODEL = config_env.env.str("ARENA_ANCHOR_MODEL", default="").strip()
    if ARENA_ANCHOR_MODEL and (len(ARENA_ANCHOR_MODEL) > 200 or not ARENA_ANCHOR_MODEL.isprintable()):
        raise ConfigError("ARENA_ANCHOR_MODEL", "a model's name from the catalogue (at most 200 printable characters)")
    ARENA_ANCHOR_RATING = config_env.floating("ARENA_ANCHOR_RATING", default=1000.0, minimum=-100_000.0, maximum=100_000.0)
    # A voter's (session's) votes past this many in one day (UTC) are kept but not counted; 0: no cap.
    ARENA_DAILY_VOTE_CAP = config_env.integer("ARENA_DAILY_VOTE_CAP", default=0, minimum=0)
except ConfigError as error:
    fail(error)

# Prompt categories tagged by a model (issue 31 §1; docs/categories.md).
try:
    # The tagger, named like an arena model: {"backend": "hf", "model_args": {"path": "SmolLM2-135M-Instruct"}}
    # (a relative path lives under PODIUM_MODELS_DIR); empty: no tagging, no tagged categories.
    ARENA_CATEGORY_TAGGER = config_env.json_object("ARENA_CATEGORY_TAGGER", default={}) or None
    if ARENA_CATEGORY_TAGGER is not None and (
        set(ARENA_CATEGORY_TAGGER) - {"backend", "model_args"}
        or ARENA_CATEGORY_TAGGER.get("backend") not in ("hf", "vllm", "openai")
        or not isinstance(ARENA_CATEGORY_TAGGER.get("model_args", {}), dict)
    ):
        raise ConfigError(
            "ARENA_CATEGORY_TAGGER", 'a JSON object {"backend": "hf"|"vllm"|"openai", "model_args": {...}}'
        )
    # The category protocols (bundled names or YAML files), one per category; each is checked here.
    ARENA_CATEGORY_PROTOCOLS = config_env.string_list(
        "ARENA_CATEGORY_PROTOCOLS",
        default=["hard-prompt", "coding", "math", "creative-writing", "instruction-following"],
    )
    for _source in ARENA_CATEGORY_PROTOCOLS:
        try:
            _load_category_protocol(_source)
        except ValueError as _problem:
            raise ConfigError("ARENA_CATEGORY_PROTOCOLS", str(_problem)[:300]) from None
    # First prompts tagged per batch (one batched model call per protocol), and the wait after a vote
    # before its batch starts (votes in that window are tagged together).
    ARENA_CATEGORY_BATCH = config_env.integer("ARENA_CATEGORY_BATCH", default=32, minimum=1)
    ARENA_CATEGORY_DEBOUNCE_S = config_env.integer("ARENA_CATEGORY_DEBOUNCE_S", default=10, minimum=0)
    ARENA_CATEGORY_MAX_ATTEMPTS = 3  # tagging runs a vote may fail in before it is marked failed
    # How far below the newest enlisted vote's id the queue looks for votes without a row (a vote whose
    # insert commits more ids late than this is missed); 0: no limit, every vote looked at each batch.
    ARENA_CATEGORY_LATE_IDS = config_env.integer("ARENA_CATEGORY_LATE_IDS", default=10_000, minimum=0)
except ConfigError as error:
    fail(error)
