"""Development and demo settings: the default. DEBUG on unless the environment says otherwise."""

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.base import *  # noqa: F403

try:
    DEBUG = config_env.boolean("DEBUG", default=True)
except ConfigError as error:
    fail(error)

if not SECRET_KEY:  # noqa: F405
    # Only for a laptop: prod.py refuses to start without a real key.
    SECRET_KEY = "dev-insecure-podium-key-change-me"
