"""Defaults every entry point resolves the same way: the web, the workers, ``manage.py`` and every
``python -m evalcore`` command (README, "Configuration").

``PODIUM_DATA_DIR`` (the public data sets bundled tasks read): the environment variable when set,
else ``shared/data`` beside the checkout (``../shared/data`` from the repository root).
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]  # evalcore/boundary/defaults.py: the checkout is three levels up


def default_data_dir() -> Path:
    return CHECKOUT.parent / "shared" / "data"


def data_dir() -> Path:
    value = os.environ.get("PODIUM_DATA_DIR", "").strip()
    return Path(value) if value else default_data_dir()


# Variables a task's data path may name that have a default when unset.
ENV_DEFAULTS = {"PODIUM_DATA_DIR": lambda: str(default_data_dir())}
