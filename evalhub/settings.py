"""Settings for evalhub.

Everything that varies between machines comes from environment variables, read through the
small typed helpers below, which fail loudly with ``ImproperlyConfigured``. The embedded default
is SQLite in WAL mode with immediate transactions and django-q2's ORM broker; ``DATABASE_URL``
switches to PostgreSQL and ``REDIS_URL`` to the Redis broker. Project knobs live in the one
``EVALHUB`` dict and are read lazily through :func:`evalhub.conf.evalhub_setting`.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evalhub.defaults import DEFAULTS, EMBEDDED_SECRET_KEY, LOCAL_HOSTS
from evalhub.secrets import secret_kinds

BASE_DIR = Path(__file__).resolve().parent.parent


def _shown(raw: str) -> str:
    """A bad value as an error message may quote it: never one that looks like a secret (a key
    pasted into the wrong variable would land on stderr)."""
    return "a value that looks like a secret (not shown)" if secret_kinds(raw) else repr(raw)


def env_str(name: str, default: str) -> str:
    """The variable's value, or ``default`` when it is unset or blank; a value holding bytes that
    are not UTF-8 is a configuration error (it would fail wherever it is written or hashed)."""
    value = os.environ.get(name, "").strip()
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ImproperlyConfigured(f"{name} must be UTF-8 text; it holds bytes that are not") from None
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
    raise ImproperlyConfigured(f"{name} must be true or false, not {_shown(raw)}")


#: The largest number of seconds, minutes or days a duration variable takes: a year of seconds
#: (or 100 years of days) is more than any setting needs, and far below what ``timedelta`` and
#: the clock arithmetic on it can hold (a bigger one stopped the first command to use it with
#: an OverflowError).
MAX_SECONDS = 366 * 24 * 3600
MAX_MINUTES = 366 * 24 * 60
MAX_DAYS = 36500
#: The most worker processes one cluster starts: more than any machine runs usefully, and a typo
#: (100000) must not fork the machine to a standstill.
MAX_WORKERS = 256


def env_int(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A whole number from ``minimum`` to ``maximum``; anything else is a configuration error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {_shown(raw)}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, not {value}")
    return value


def env_level(name: str, default: float) -> float:
    """A significance level: a decimal number above 0 and at most 0.5; anything else is a configuration error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a decimal number such as 0.05, not {raw!r}") from None
    if not 0 < value <= 0.5:  # also refuses nan
        raise ImproperlyConfigured(f"{name} must be above 0 and at most 0.5, not {raw!r}")
    return value


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices`` (any case); anything else is a configuration error naming them."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {_shown(raw)}")
    return raw


def env_concurrency(name: str) -> dict[str, int]:
    """A JSON object of provider profile → concurrent executions (whole numbers ≥ 1), e.g.
    ``{"openai": 2}``; unset: no limits. Anything else is a configuration error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise ImproperlyConfigured(f'{name} must be a JSON object such as {{"openai": 2}}, not {_shown(raw)}') from None
    if not isinstance(value, dict) or not all(
        isinstance(key, str) and key.strip() and isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1
        for key, limit in value.items()
    ):
        raise ImproperlyConfigured(f'{name} must map provider profile names to whole numbers of at least 1, such as {{"openai": 2}}')
    return {key.strip(): limit for key, limit in value.items()}


def env_list(name: str) -> list[str]:
    """A comma-separated list, items trimmed, blanks dropped."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


DEBUG = env_bool("EVALHUB_DEBUG", False)
#: ``EVALHUB_ENV=production`` switches on the production profile (docs/production.md): HTTPS only
#: (HSTS, SSL redirect, secure cookies), hashed static files collected for WhiteNoise, and system
#: checks (evalhub/checks.py) that refuse the built-in secret key and local-only hosts.
EVALHUB_ENV = env_str("EVALHUB_ENV", "development").lower()
if EVALHUB_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(f"EVALHUB_ENV must be development or production, not {EVALHUB_ENV!r}")
PRODUCTION = EVALHUB_ENV == "production"
# A fixed key is fine for the embedded, single-machine default; deployments set
# DJANGO_SECRET_KEY (a shared or production deployment on this key is refused by a system
# check). It signs sessions only: provider credentials are never stored at all.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip() or EMBEDDED_SECRET_KEY
ALLOWED_HOSTS = env_list("EVALHUB_ALLOWED_HOSTS") or list(LOCAL_HOSTS)
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
    "evalhub.apps.ApiTokensConfig",  # django-rest-knox
    "evalhub.apps.SignInLockoutsConfig",  # django-axes
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "adminsortable2",
    "import_export",
    "django_q",
    "health_check",
    "evalhub",
    "candidates",
    "schedules",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A NUL character in the address is a 400 before any view: PostgreSQL refuses it in a query.
    "evalhub.middleware.RejectNulMiddleware",
    # Serves the admin's, the API docs' and evalhub's static files from the app directories, so
    # `make serve` works with DEBUG off and no collectstatic step.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# Sign-in attempts are rate-limited (django-axes): after AXES_FAILURE_LIMIT failures for one
# user name from one address, that pair is locked out for AXES_COOLOFF_TIME.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("EVALHUB_SIGNIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("EVALHUB_SIGNIN_COOLOFF_MINUTES", 15, minimum=1, maximum=MAX_MINUTES))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# The lockout is a page of the site saying for how long, not a bare line of text.
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# A key pasted into the user name field must not be stored (nor shown in the admin) as typed.
AXES_USERNAME_CALLABLE = "evalhub.signin.attempted_username"

# The admin's price table imports and exports CSV only (a JSON upload of any shape would reach the
# library unchecked), and an exported cell that a spreadsheet would run as a formula is escaped.
IMPORT_EXPORT_ESCAPE_FORMULAE_ON_EXPORT = True

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
    "database is locked" (docs/failure-modes.md B6).
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(f"EVALHUB_SQLITE_PATH {str(path)!r}: its folder cannot be created ({exc.strerror})") from None
    sqlite_file_problem = _sqlite_file_problem(path)
    if sqlite_file_problem:
        raise ImproperlyConfigured(f"EVALHUB_SQLITE_PATH {str(path)!r} {sqlite_file_problem}")
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": sqlite_options(),
        "TEST": {"NAME": None},
    }


def _sqlite_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot hold the embedded database — a folder, or a file that is not SQLite's —
    or None (also for a file not made yet). Said here, as the setting's error: ``migrate``, the
    first command a new user runs, printed the driver's traceback for either."""
    if path.is_dir():
        return f"is a folder: name a database file, such as {str(path / 'evalhub.sqlite3')!r}"
    try:
        with path.open("rb") as file:
            header = file.read(16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    # An empty file is one SQLite makes a database of; any other starts with SQLite's header.
    if header and header != b"SQLite format 3\x00":
        return "is not a SQLite database: name a new file, or the evalhub database file"
    return None


def sqlite_options() -> dict:
    """The embedded database's connection options. The write-ahead log is copied back into the
    database file every 4000 pages (16 MB) rather than SQLite's 1000: a night rewrites the same
    run, execution and index pages with every execution's two commits, and each copy-back writes
    every page it holds and waits for the disk twice (docs/benchmarks.md)."""
    return {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=4000; PRAGMA foreign_keys=ON;",
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
STATIC_ROOT = Path(env_str("EVALHUB_STATIC_ROOT", str(BASE_DIR / "var" / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise serves from the finders but expects the folder
# Development serves the app directories as they are; production serves what `collectstatic`
# put in STATIC_ROOT, compressed and with hashed names (cached for a year by browsers).
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG
if PRODUCTION:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    # HTTPS only. evalhub runs behind a proxy that terminates TLS and sets X-Forwarded-Proto
    # (docs/production.md); the proxy must overwrite any such header a client sends.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = env_int("EVALHUB_HSTS_SECONDS", 31536000, minimum=1, maximum=2 * MAX_SECONDS)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("EVALHUB_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("EVALHUB_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # /health/ answers plain-HTTP probes from a load balancer without a redirect.
    SECURE_REDIRECT_EXEMPT = [r"^health/$"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:runs"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    # Token first: DRF answers a request without credentials with the first class's challenge,
    # so it is a 401 with ``WWW-Authenticate: Token`` (session auth has no challenge: a 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # API tokens are stored hashed, with an expiry (django-rest-knox); `Authorization: Token …`.
        "evalhub.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["evalhub.api.permissions.ReadSignedInWriteStaff"],
    "DEFAULT_PAGINATION_CLASS": "evalhub.api.pagination.StablePageNumberPagination",
    "PAGE_SIZE": 50,
    # No client-chosen ordering: every list has a fixed order ending in a unique key (stable pages).
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PARSER_CLASSES": ["evalhub.api.parsers.StrictJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "evalhub.api.schema.ApiAutoSchema",
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
    # One name for the provider list wherever it appears (a candidate's provider, a case's providers).
    "ENUM_NAME_OVERRIDES": {"ProviderEnum": "candidates.models.Provider"},
}

REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env_int("EVALHUB_TOKEN_TTL_DAYS", 90, minimum=1, maximum=MAX_DAYS)),
    "AUTO_REFRESH": False,
}

REDIS_URL = os.environ.get("REDIS_URL", "").strip()
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured("REDIS_URL must be a Redis URL such as redis://127.0.0.1:6379/0 (redis://, rediss:// or unix://), or unset")

# One cache every process shares (django-q2 keeps its cluster status there, so `qinfo`, the
# admin and /health/ see every worker): Redis when configured, else a database table (created
# by runs' migration 0011).
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "evalhub"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "evalhub_cache"}}

# Alert emails go through Django's mail backends; the SMTP password is read from its variable
# when sending, never stored.
EMAIL_BACKEND = env_str("EVALHUB_EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EVALHUB_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EVALHUB_EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EVALHUB_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EVALHUB_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EVALHUB_EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("EVALHUB_EMAIL_FROM", "evalhub@localhost")

Q_CLUSTER = {
    "name": "evalhub",
    "workers": env_int("EVALHUB_Q_WORKERS", 1, minimum=1, maximum=MAX_WORKERS),
    # A night fans out into one task per execution: the timeout must cover one execution (its
    # turns under maxLatencyMs) and ``retry`` must exceed it, or the ORM broker hands a running
    # task to a second worker — harmless (the execution's lease decides), but wasted.
    "timeout": env_int("EVALHUB_Q_TIMEOUT", 3600, minimum=60, maximum=MAX_SECONDS),
    "retry": env_int("EVALHUB_Q_RETRY", 3600 + 600, minimum=61, maximum=MAX_SECONDS),
    "max_attempts": 1,
    "catch_up": False,
    "save_limit": 500,
    "ack_failures": True,
    "label": "Tasks",
    # Daily schedules keep UTC wall-clock time: the nightly never drifts with daylight saving (docs/failure-modes.md B2).
    "time_zone": "UTC",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# Project knobs; read lazily through evalhub.conf.evalhub_setting, never at import time. The
# defaults live in evalhub.defaults; the environment overrides them here.
EVALHUB = {
    **DEFAULTS,
    "SCHEDULE_SEED": env_str("EVALHUB_SCHEDULE_SEED", DEFAULTS["SCHEDULE_SEED"]),
    "MAX_CAMPAIGN_COST_USD": os.environ.get("EVALHUB_MAX_CAMPAIGN_COST_USD"),
    "NIGHTLY_TIME_UTC": env_str("EVALHUB_NIGHTLY_TIME_UTC", DEFAULTS["NIGHTLY_TIME_UTC"]),
    "BASELINE_READY": env_bool("EVALHUB_BASELINE_READY", DEFAULTS["BASELINE_READY"]),
    "RETENTION_DAYS": env_int("EVALHUB_RETENTION_DAYS", DEFAULTS["RETENTION_DAYS"], minimum=1, maximum=MAX_DAYS),
    "RUNNER_BUILD": os.environ.get("EVALHUB_RUNNER_BUILD", "").strip() or None,
    "MODEL_PROVIDERS_JSON": os.environ.get("EVALHUB_MODEL_PROVIDERS", ""),
    "RUNTIME_BINARIES": {
        "codex": env_str("EVALHUB_CODEX_BIN", str(BASE_DIR / "node_modules" / ".bin" / "codex")),
        "opencode": env_str("EVALHUB_OPENCODE_BIN", str(BASE_DIR / "node_modules" / ".bin" / "opencode")),
        "claude-acp": env_str("EVALHUB_CLAUDE_ACP_BIN", str(BASE_DIR / "node_modules" / ".bin" / "claude-agent-acp")),
        "codex-acp": env_str("EVALHUB_CODEX_ACP_BIN", str(BASE_DIR / "node_modules" / ".bin" / "codex-acp")),
    },
    "TRACE_CAP_BYTES": env_int("EVALHUB_TRACE_CAP_BYTES", DEFAULTS["TRACE_CAP_BYTES"], minimum=1024),
    "LEASE_SECONDS": env_int("EVALHUB_LEASE_SECONDS", DEFAULTS["LEASE_SECONDS"], minimum=2, maximum=MAX_SECONDS),
    "HEARTBEAT_SECONDS": env_int("EVALHUB_HEARTBEAT_SECONDS", DEFAULTS["HEARTBEAT_SECONDS"], minimum=1, maximum=MAX_SECONDS),
    "REAP_CHECK_SECONDS": env_int("EVALHUB_REAP_CHECK_SECONDS", DEFAULTS["REAP_CHECK_SECONDS"], minimum=0, maximum=MAX_SECONDS),
    "DB_RETRY_SECONDS": env_int("EVALHUB_DB_RETRY_SECONDS", DEFAULTS["DB_RETRY_SECONDS"], minimum=0, maximum=MAX_SECONDS),
    "REDISPATCH_SECONDS": env_int("EVALHUB_REDISPATCH_SECONDS", DEFAULTS["REDISPATCH_SECONDS"], minimum=1, maximum=MAX_SECONDS),
    "PROVIDER_CONCURRENCY": env_concurrency("EVALHUB_PROVIDER_CONCURRENCY"),
    "SLOT_WAIT_SECONDS": env_int("EVALHUB_SLOT_WAIT_SECONDS", DEFAULTS["SLOT_WAIT_SECONDS"], minimum=0, maximum=MAX_SECONDS),
    "COVERAGE_CASE_SLOTS": env_choice("EVALHUB_COVERAGE_CASE_SLOTS", ("every", "reachable"), DEFAULTS["COVERAGE_CASE_SLOTS"]),
    "NOTIFY_RETRY_SECONDS": env_int("EVALHUB_NOTIFY_RETRY_SECONDS", DEFAULTS["NOTIFY_RETRY_SECONDS"], minimum=1, maximum=MAX_SECONDS),
    "NOTIFY_MAX_ATTEMPTS": env_int("EVALHUB_NOTIFY_MAX_ATTEMPTS", DEFAULTS["NOTIFY_MAX_ATTEMPTS"], minimum=1),
    "PUBLIC_URL": env_str("EVALHUB_PUBLIC_URL", DEFAULTS["PUBLIC_URL"]),
    # Nights are read with a LIMIT: a number beyond 64 bits failed every signal page with a 500.
    "SIGNAL_RECENT_NIGHTS": env_int("EVALHUB_SIGNAL_RECENT_NIGHTS", DEFAULTS["SIGNAL_RECENT_NIGHTS"], minimum=1, maximum=MAX_DAYS),
    "SIGNAL_BASELINE_NIGHTS": env_int("EVALHUB_SIGNAL_BASELINE_NIGHTS", DEFAULTS["SIGNAL_BASELINE_NIGHTS"], minimum=1, maximum=MAX_DAYS),
    "SIGNAL_ALPHA": env_level("EVALHUB_SIGNAL_ALPHA", DEFAULTS["SIGNAL_ALPHA"]),
}
# The build label goes into every report's bundle (shown, exported): never a secret.
if EVALHUB["RUNNER_BUILD"] and secret_kinds(EVALHUB["RUNNER_BUILD"]):
    raise ImproperlyConfigured(
        "EVALHUB_RUNNER_BUILD looks like a secret; it is stored in every report: use a build label such as a commit id"
    )
# A lease must outlive at least two heartbeats, or a live execution loses it between two of them
# and its good result is thrown away (runs/leases.py).
if EVALHUB["HEARTBEAT_SECONDS"] * 2 > EVALHUB["LEASE_SECONDS"]:
    raise ImproperlyConfigured(
        f"EVALHUB_HEARTBEAT_SECONDS ({EVALHUB['HEARTBEAT_SECONDS']}) must be at most half of EVALHUB_LEASE_SECONDS "
        f"({EVALHUB['LEASE_SECONDS']}): a lease would expire between two heartbeats"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "evalhub.logging.RedactSecretsFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact"], "formatter": "plain"},
    },
    "root": {
        "handlers": ["console"],
        "level": env_choice("EVALHUB_LOG_LEVEL", ("debug", "info", "warning", "error", "critical"), "warning").upper(),
    },
    # runserver's access log prints query strings: keep secrets typed into a URL out of it too.
    "loggers": {"django.server": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}
