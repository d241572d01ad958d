"""Settings for evalhub.

Everything that varies between machines comes from environment variables, read through the
small typed helpers below, which fail loudly with ``ImproperlyConfigured``. The embedded default
is SQLite in WAL mode with immediate transactions and django-q2's ORM broker; ``DATABASE_URL``
switches to PostgreSQL and ``REDIS_URL`` to the Redis broker. Project knobs live in the one
``EVALHUB`` dict and are read lazily through :func:`evalhub.conf.evalhub_setting`.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str) -> str:
    """The variable's value, or ``default`` when it is unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or default


def env_bool(name: str, default: bool) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); anything else is a configuration error."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """A whole number no smaller than ``minimum``; anything else is a configuration error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_list(name: str) -> list[str]:
    """A comma-separated list, items trimmed, blanks dropped."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


DEBUG = env_bool("EVALHUB_DEBUG", False)
# A fixed key is fine for the embedded, single-machine default; deployments set
# DJANGO_SECRET_KEY. It signs sessions only: provider credentials are never stored at all.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip() or "evalhub-embedded-default-key"
ALLOWED_HOSTS = env_list("EVALHUB_ALLOWED_HOSTS") or ["localhost", "127.0.0.1", "[::1]", "testserver"]
CSRF_TRUSTED_ORIGINS = env_list("EVALHUB_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "adminsortable2",
    "django_q",
    "evalhub",
    "candidates",
    "schedules",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's, the API docs' and evalhub's static files from the app directories, so
    # `make serve` works with DEBUG off and no collectstatic step.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "evalhub.urls"
WSGI_APPLICATION = "evalhub.wsgi.application"

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


def database_config() -> dict:
    """The default database: ``DATABASE_URL`` when set, else the embedded SQLite file.

    SQLite runs in WAL mode with ``BEGIN IMMEDIATE`` transactions and a 20 s busy timeout, so the
    qcluster worker and the web process queue for the write lock instead of failing with
    "database is locked" (known-failure-modes B6).
    """
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        try:
            config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        except Exception as exc:  # dj-database-url raises several types for a bad URL
            raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
        if config["ENGINE"] == "django.db.backends.sqlite3":
            config["OPTIONS"] = sqlite_options()
        return config
    path = Path(env_str("EVALHUB_SQLITE_PATH", str(BASE_DIR / "var" / "evalhub.sqlite3")))
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": sqlite_options(),
        "TEST": {"NAME": None},
    }


def sqlite_options() -> dict:
    return {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
    }


DATABASES = {"default": database_config()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise serves from the finders but expects the folder
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:runs"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["evalhub.api.permissions.ReadSignedInWriteStaff"],
    "DEFAULT_PAGINATION_CLASS": "evalhub.api.pagination.StablePageNumberPagination",
    "PAGE_SIZE": 50,
    # No client-chosen ordering: every list has a fixed order ending in a unique key (stable pages).
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PARSER_CLASSES": ["evalhub.api.parsers.StrictJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "evalhub.api.exceptions.exception_handler",
    "COERCE_DECIMAL_TO_STRING": False,
    "STRICT_JSON": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "evalhub API",
    "DESCRIPTION": "Slots, candidates, budgets, workflow cases, chaos scenarios, schedules, "
    "coverage, runs and executions of evalhub's recurring live evaluations.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

REDIS_URL = os.environ.get("REDIS_URL", "").strip()

Q_CLUSTER = {
    "name": "evalhub",
    "workers": env_int("EVALHUB_Q_WORKERS", 1, minimum=1),
    # A nightly can run for hours: the timeout must cover it and ``retry`` must exceed the
    # timeout, or the broker hands the same task to a second worker (known-failure-modes B1).
    "timeout": env_int("EVALHUB_Q_TIMEOUT", 6 * 3600, minimum=60),
    "retry": env_int("EVALHUB_Q_RETRY", 6 * 3600 + 600, minimum=61),
    "max_attempts": 1,
    "catch_up": False,
    "save_limit": 500,
    "ack_failures": True,
    "label": "Tasks",
    # Daily schedules keep UTC wall-clock time: the nightly never drifts with daylight saving (B2).
    "time_zone": "UTC",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# Project knobs; read lazily through evalhub.conf.evalhub_setting, never at import time.
EVALHUB = {
    "SCHEDULE_SEED": env_str("EVALHUB_SCHEDULE_SEED", "runner-live-seven-week-v1"),
    # Kept as the raw string: parse_campaign_cost_limit validates it when a run starts.
    "MAX_CAMPAIGN_COST_USD": os.environ.get("EVALHUB_MAX_CAMPAIGN_COST_USD"),
    "NIGHTLY_TIME_UTC": env_str("EVALHUB_NIGHTLY_TIME_UTC", "04:00"),
    # Executors that start processes or reach the network are switched on here.
    "EXECUTORS": {},
    # Alerts fire only once the baseline is declared ready (and seven compatible reports exist).
    "BASELINE_READY": env_bool("EVALHUB_BASELINE_READY", False),
    # Runs older than this many days are pruned daily, never the last seven reports of a bundle.
    "RETENTION_DAYS": env_int("EVALHUB_RETENTION_DAYS", 120, minimum=1),
    # Part of the live bundle identity; evalhub's version when unset.
    "RUNNER_BUILD": os.environ.get("EVALHUB_RUNNER_BUILD", "").strip() or None,
    # Live executions. Model providers by qualification profile: where the runtime sends model
    # requests, which wire API, and the *name* of the variable holding the key (never the key).
    # A candidate without a profile uses DEFAULT_PROVIDER_PROFILES[provider]. EVALHUB_MODEL_PROVIDERS
    # (a JSON object of the same shape) overrides or adds profiles; `manage.py check` validates it.
    "MODEL_PROVIDERS": {
        "openai": {"base_url": "https://api.openai.com/v1", "wire_api": "responses", "env_key": "OPENAI_API_KEY"},
        "openrouter": {"base_url": "https://openrouter.ai/api/v1", "wire_api": "chat", "env_key": "OPENROUTER_API_KEY"},
    },
    "MODEL_PROVIDERS_JSON": os.environ.get("EVALHUB_MODEL_PROVIDERS", ""),
    "DEFAULT_PROVIDER_PROFILES": {"codex": "openai", "opencode": "openrouter", "acpx": "openai"},
    # Runtime binaries, installed by `make install` (npm ci) from package.json's pinned versions.
    "RUNTIME_BINARIES": {"codex": env_str("EVALHUB_CODEX_BIN", str(BASE_DIR / "node_modules" / ".bin" / "codex"))},
    # The only host variables a runtime inherits, besides the candidate's required variables.
    "RUNTIME_ENV_ALLOWLIST": ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR"],
    # Raw protocol traces are kept compressed, up to this many uncompressed bytes per attempt.
    "TRACE_CAP_BYTES": env_int("EVALHUB_TRACE_CAP_BYTES", 8 * 1024 * 1024, minimum=1024),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "evalhub.logging.RedactSecretsFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact"], "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": env_str("EVALHUB_LOG_LEVEL", "WARNING")},
    # runserver's access log prints query strings: keep secrets typed into a URL out of it too.
    "loggers": {"django.server": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}
