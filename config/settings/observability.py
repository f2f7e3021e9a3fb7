"""Metrics and logs: the /metrics endpoint, prometheus_client's multiprocess folder, the log format."""

from __future__ import annotations

import os
from pathlib import Path

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.core import VAR_DIR

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
