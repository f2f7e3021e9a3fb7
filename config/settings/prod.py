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
    # Strict-Transport-Security: one year by default once the site is served over HTTPS.
    SECURE_HSTS_SECONDS = config_env.integer("SECURE_HSTS_SECONDS", default=31_536_000 if SECURE_SSL else 0, minimum=0)
    SECURE_HSTS_PRELOAD = config_env.boolean("SECURE_HSTS_PRELOAD", default=False)
except ConfigError as error:
    fail(error)

DEBUG = False
SESSION_COOKIE_SECURE = SECURE_SSL
CSRF_COOKIE_SECURE = SECURE_SSL
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_SSL_REDIRECT = SECURE_SSL
# Health probes come from inside the deployment over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz/?$"]
SECURE_HSTS_INCLUDE_SUBDOMAINS = bool(SECURE_HSTS_SECONDS)
if TRUSTED_PROXY_COUNT:  # noqa: F405
    # Behind the documented proxy (docker/nginx.conf sets X-Forwarded-Proto): trust its word on HTTPS,
    # and only then, since a client could otherwise claim HTTPS itself.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
