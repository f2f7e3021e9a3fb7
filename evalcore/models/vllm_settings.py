"""Engine arguments for the ``vllm`` backend, and the check that a model fits, before vLLM is imported.

- :class:`EngineSettings` checks the engine arguments a user may pass (``--model-args``, the arena
  catalogue's ``model_args``), each bad one refused in one line, and fills in the defaults that are
  safe where the engine runs: on CPU the checkpoint's own dtype (vLLM's ``auto`` picks bfloat16 there
  for a float32 checkpoint, which moves log-probabilities by up to 0.28), a bounded KV cache (vLLM's
  default reserves most of the host's RAM) and eager mode (compiling costs 55-115 s a load here, more
  than it saves; docs/PERFORMANCE.md); streams send every token on CPU and every 8 tokens on a GPU;
- :func:`check_fits` refuses a model whose weights and KV cache do not fit the memory budget, or
  whose KV cache cannot hold one full-length sequence, before anything is allocated.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from evalcore.models.base import ModelDoesNotFit

GiB = 1 << 30
DTYPES = ("auto", "float16", "bfloat16", "float32")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
CPU_KV_CACHE_GB = 1.0  # on CPU: 1 GiB holds ~23,000 tokens of SmolLM2-135M in float32
MEMORY_HEADROOM = 0.8  # of the host's available memory, the default budget on CPU
# Tokens per streamed delta (vLLM's stream_interval; the first token and the end are sent at once). An
# engine step on a GPU is a few milliseconds, and waking every stream's consumer thread after each one
# cost Podium's backend 35% against raw vLLM there; on CPU a step is tens of milliseconds and 1 costs
# nothing (docs/PERFORMANCE.md, "vLLM").
STREAM_INTERVAL = {"cpu": 1, "cuda": 8}


def cuda_available() -> bool:
    try:
        import torch
    except ModuleNotFoundError:  # pragma: no cover - torch is a dependency of the project
        return False
    return bool(torch.cuda.is_available())


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _number(value, name: str, kind=int, *, minimum=None, maximum=None, positive=True):
    noun = f"{'positive ' if positive else ''}{'whole number' if kind is int else 'number'}"
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be a {noun}, not {value!r}")
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a {noun}, not {value!r}") from None
    if kind is int and isinstance(value, float) and value != number:
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if kind is float and not (number == number and abs(number) != float("inf")):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    if positive and number <= 0:
        raise ValueError(f"{name} must be positive, not {value!r}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value!r}")
    return number


def config_int(config: dict, key: str, default: int) -> int:
    """A whole-number field of config.json (absent or null: ``default``); anything else is refused."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"config.json's {key} must be a whole number >= 0, not {value!r}")
    return value


def checkpoint_dtype(config: dict) -> str:
    """The dtype a checkpoint's config.json declares (``torch_dtype``, or ``dtype`` in newer files)."""
    declared = str(config.get("torch_dtype") or config.get("dtype") or "float32").replace("torch.", "")
    return declared if declared in DTYPE_BYTES else "float32"


ENGINE_ARGS = {
    "dtype": lambda v, name: _choice(v, name, DTYPES),
    "max_model_len": lambda v, name: _number(v, name),
    "enforce_eager": _flag,
    "max_num_seqs": lambda v, name: _number(v, name, maximum=4096),
    "tensor_parallel_size": lambda v, name: _number(v, name, maximum=64),
    "gpu_memory_utilization": lambda v, name: _number(v, name, float, maximum=1),
    "kv_cache_gb": lambda v, name: _number(v, name, float, maximum=1024),
    "memory_budget_gb": lambda v, name: _number(v, name, float),
    "seed": lambda v, name: _number(v, name, positive=False, minimum=0, maximum=2**32 - 1),
    "enable_prefix_caching": _flag,
    "stream_interval": lambda v, name: _number(v, name, maximum=1024),
}


def _choice(value, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} {value!r} is not supported; choose one of {choices}")
    return value


def check_engine_args(given: dict) -> dict:
    """The vllm engine arguments in ``given``, each checked and converted (``"0.5"`` → 0.5, ``"true"`` →
    True), ``max_length`` read as ``max_model_len``. Needs neither the checkpoint nor the device, so the
    arena catalogue checks a declared vLLM model with it on the web host. One-line ValueError per fault."""
    if "max_length" in given and "max_model_len" in given:
        raise ValueError("give max_model_len or max_length (the same thing), not both")
    unknown = sorted(set(given) - set(ENGINE_ARGS) - {"max_length"})
    if unknown:
        raise ValueError(f"unknown vllm engine argument(s) {unknown}; accepted: {', '.join(ENGINE_ARGS)}")
    checked = {}
    for name, value in given.items():
        key = "max_model_len" if name == "max_length" else name
        checked[key] = ENGINE_ARGS[key](value, name)
    return checked


@dataclass(frozen=True)
class EngineSettings:
    """The engine arguments one ``vllm`` backend runs with, checked and with defaults filled in.

    ``as_engine_args()`` gives vLLM's ``EngineArgs`` keywords; ``as_dict()`` is what the protocol
    records (every argument that can change a number, or whether the model loads).
    """

    dtype: str
    max_model_len: int
    enforce_eager: bool
    max_num_seqs: int
    tensor_parallel_size: int
    gpu_memory_utilization: float
    kv_cache_gb: float | None
    seed: int
    enable_prefix_caching: bool
    device: str
    memory_budget_gb: float | None = None
    stream_interval: int = 1  # a stream's text arrives every this many tokens (the first and last at once)

    @classmethod
    def resolve(cls, config: dict, *, device: str | None = None, **given) -> EngineSettings:
        """Check the user's arguments against the checkpoint's ``config`` (config.json) and the device,
        and fill in the defaults. Raises ValueError with one line naming the argument for any bad value.
        """
        device = device or ("cuda" if cuda_available() else "cpu")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
        on_cpu = device == "cpu"
        args = check_engine_args(given)
        dtype = args.get("dtype", "auto")
        if dtype == "auto":  # the checkpoint's own dtype, as the hf backend loads it (vLLM's auto differs on CPU)
            dtype = checkpoint_dtype(config)
        window = config_int(config, "max_position_embeddings", 2048)
        length_key = "max_length" if "max_length" in given else "max_model_len"
        length = args.get("max_model_len", min(window, 8192))  # default as the hf backend: at most 8192
        if length > window:
            raise ValueError(f"{length_key} {length} is longer than the model's window ({window} positions)")
        tp = args.get("tensor_parallel_size", 1)
        if on_cpu and tp != 1:
            raise ValueError("tensor_parallel_size must be 1 on CPU: tensor parallelism shards a model over GPUs")
        if not on_cpu:
            import torch

            if tp > torch.cuda.device_count():
                raise ValueError(f"tensor_parallel_size {tp} is more than the {torch.cuda.device_count()} GPU(s) here")
        return cls(
            dtype=dtype,
            max_model_len=length,
            enforce_eager=args.get("enforce_eager", on_cpu),
            # vLLM's own default on CPU and GPU alike. 64 on CPU cost 10% more engine steps and 20% more time on
            # GSM8K's 100 questions (a second wave of requests; docs/PERFORMANCE.md, "vLLM").
            max_num_seqs=args.get("max_num_seqs", 256),
            tensor_parallel_size=tp,
            gpu_memory_utilization=args.get("gpu_memory_utilization", 0.9),
            kv_cache_gb=args.get("kv_cache_gb", CPU_KV_CACHE_GB if on_cpu else None),
            seed=args.get("seed", 0),
            enable_prefix_caching=args.get("enable_prefix_caching", True),
            device=device,
            memory_budget_gb=args.get("memory_budget_gb"),
            stream_interval=args.get("stream_interval", STREAM_INTERVAL[device]),
        )

    def as_dict(self) -> dict:
        recorded = asdict(self)
        # How often a stream's text is handed over changes no number and no load: left out of the model's
        # identity, so a worker with another interval shares the response cache and the protocol.
        del recorded["stream_interval"]
        return recorded

    def as_engine_args(self, path: Path) -> dict:
        args = {
            "model": str(path),
            "tokenizer": str(path),
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "enforce_eager": self.enforce_eager,
            "max_num_seqs": self.max_num_seqs,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "seed": self.seed,
            "enable_prefix_caching": self.enable_prefix_caching,
            "trust_remote_code": False,
            "load_format": "safetensors",
            "disable_log_stats": True,
        }
        if self.kv_cache_gb is not None:
            args["kv_cache_memory_bytes"] = int(self.kv_cache_gb * GiB)
        if self.stream_interval != 1:  # vLLM's own default; older releases (before 0.12) lack the argument
            args["stream_interval"] = self.stream_interval
        return args


def kv_bytes_per_token(config: dict, dtype: str) -> int:
    """Bytes of KV cache one token takes: keys and values for every layer and KV head."""
    layers = config_int(config, "num_hidden_layers", 0)
    heads = config_int(config, "num_attention_heads", 1) or 1
    kv_heads = config_int(config, "num_key_value_heads", heads)
    head_dim = config_int(config, "head_dim", config_int(config, "hidden_size", 0) // heads)
    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES[dtype]


def available_memory_bytes() -> int:
    """The host's available memory (MemAvailable), the basis of the CPU budget."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_fits(
    settings: EngineSettings, config: dict, weight_bytes: int, *, checkpoint_dtype_name: str
) -> dict:
    """Refuse, with the figures, a model that cannot run within its memory budget.

    On CPU the budget is ``memory_budget_gb`` or 80% of the host's available memory; the weights (at the
    engine's dtype) and the KV cache must fit it. On GPU vLLM measures the card itself; only the KV
    cache's one-sequence minimum is checked here. Returns the plan (bytes), recorded with the protocol.
    """
    per_token = kv_bytes_per_token(config, settings.dtype)
    weights = weight_bytes * DTYPE_BYTES[settings.dtype] // DTYPE_BYTES.get(checkpoint_dtype_name, 4)
    plan = {"weights_bytes": weights, "kv_bytes_per_token": per_token}
    if settings.kv_cache_gb is not None:
        kv = int(settings.kv_cache_gb * GiB)
        plan["kv_cache_bytes"] = kv
        if per_token and kv // per_token < settings.max_model_len:
            raise ValueError(
                f"a KV cache of {settings.kv_cache_gb:g} GiB holds {kv // per_token} tokens, fewer than one "
                f"sequence of max_model_len={settings.max_model_len}: raise kv_cache_gb to at least "
                f"{per_token * settings.max_model_len / GiB:.3f} or lower max_model_len"
            )
    if settings.device == "cpu":
        budget = (
            int(settings.memory_budget_gb * GiB)
            if settings.memory_budget_gb is not None
            else int(available_memory_bytes() * MEMORY_HEADROOM)
        )
        need = weights + plan.get("kv_cache_bytes", 0)
        plan["budget_bytes"] = budget
        if need > budget:
            raise ModelDoesNotFit(
                f"the model does not fit: {weights / GiB:.2f} GiB of {settings.dtype} weights + "
                f"{plan.get('kv_cache_bytes', 0) / GiB:.2f} GiB of KV cache is more than the memory budget of "
                f"{budget / GiB:.2f} GiB (memory_budget_gb, else 80% of available memory): lower kv_cache_gb, "
                "pick a smaller dtype, or run it on a larger worker"
            )
    return plan


def read_config(path: Path) -> dict:
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path / 'config.json'} is not readable JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path / 'config.json'} is not a JSON object")
    return config
