"""Production settings: DEBUG off, SECRET_KEY required, secure cookies."""

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.base import *  # noqa: F403

try:
    if not SECRET_KEY:  # noqa: F405
        raise ConfigError("SECRET_KEY", "required in production (a long random string)")
    if len(SECRET_KEY) < 32:  # noqa: F405
        raise ConfigError("SECRET_KEY", "too short for production: use at least 32 random characters")
    if config_env.boolean("DEBUG", default=False):
        raise ConfigError("DEBUG", "must be off in production")
    SECURE_SSL = config_env.boolean("SECURE_SSL", default=True)
except ConfigError as error:
    fail(error)

DEBUG = False
SESSION_COOKIE_SECURE = SECURE_SSL
CSRF_COOKIE_SECURE = SECURE_SSL
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
