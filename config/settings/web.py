"""Django itself: apps, middleware, login throttling, URLs, templates, static and media files, mail.

Also what the web servers trust of the network in front of them (:data:`TRUSTED_PROXY_COUNT`).
"""

from __future__ import annotations

from datetime import timedelta

from config import env as config_env
from config.env import ConfigError, fail
from config.settings.core import BASE_DIR, DEBUG, VAR_DIR

try:
    # Reverse proxies in front of the web servers that append to X-Forwarded-For (docker/compose.yaml
    # has one). 0: the client is REMOTE_ADDR and the header is ignored, so nobody can forge it.
    TRUSTED_PROXY_COUNT = config_env.integer("TRUSTED_PROXY_COUNT", default=0, minimum=0)
except ConfigError as error:
    fail(error)

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
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as static files: /api/docs/ works offline (no CDN)
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
