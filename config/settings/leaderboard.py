"""The leaderboard: submissions and their uploads, the frozen suite and its engine, contamination checks.

See docs/leaderboard.md, docs/uploads.md and docs/contamination.md for what each setting governs.
"""

from __future__ import annotations

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.core import VAR_DIR
from config.settings.web import MEDIA_ROOT

# Leaderboard submissions (leaderboard/checkpoints.py validates uploads before anything is queued).
# LEADERBOARD_MODEL_STORE: a folder of checkpoints staff may name instead of uploading ("" = off).
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
