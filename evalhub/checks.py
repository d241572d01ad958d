"""System checks (``manage.py check``), registered from ``EvalhubConfig.ready``.

Stable ids: evalhub.E001 cost ceiling, evalhub.E002 django-q2 retry/timeout, evalhub.E003 nightly
time, evalhub.E004 schedule seed, evalhub.E005 django-q2 time zone, evalhub.E006 model provider
profiles, evalhub.E007 a Codex profile on a wire API codex does not speak, evalhub.E008 a deployment on the
built-in secret key, evalhub.E009 the production profile with local-only hosts or DEBUG on, evalhub.E010 a
deployment on a weak secret key (Django's W009 criteria), evalhub.E011 a public URL that is not an
http(s) address or holds a password, evalhub.E012 unusable signal settings, evalhub.W001 a live runtime
that is not installed at its pinned version.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.checks.security.base import SECRET_KEY_INSECURE_PREFIX, SECRET_KEY_MIN_LENGTH, SECRET_KEY_MIN_UNIQUE_CHARACTERS

from evalhub.conf import evalhub_setting
from evalhub.defaults import EMBEDDED_SECRET_KEY, LOCAL_HOSTS
from evalhub.secrets import secret_kinds

UTC_NAMES = {"UTC", "Etc/UTC", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu", "GMT", "Etc/GMT"}


@register()
def check_evalhub_settings(app_configs=None, **kwargs) -> list[Error]:
    from runs.periodic import parse_nightly_time
    from schedules.building import ScheduleError, parse_campaign_cost_limit

    errors: list[Error] = []
    try:
        parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD"))
    except ScheduleError as exc:
        errors.append(Error(str(exc), hint="Set it to a positive decimal such as 12, or unset it.", id="evalhub.E001"))
    q_cluster = getattr(settings, "Q_CLUSTER", {})
    timeout, retry = q_cluster.get("timeout"), q_cluster.get("retry")
    if timeout is not None and retry is not None and retry <= timeout:
        errors.append(
            Error(
                f"Q_CLUSTER retry ({retry} s) must be longer than timeout ({timeout} s), or a long nightly is "
                "delivered to a second worker while the first is still running.",
                hint="Raise EVALHUB_Q_RETRY above EVALHUB_Q_TIMEOUT.",
                id="evalhub.E002",
            )
        )
    try:
        parse_nightly_time(evalhub_setting("NIGHTLY_TIME_UTC"))
    except ValueError:
        errors.append(
            Error(
                "EVALHUB_NIGHTLY_TIME_UTC must be a UTC time of day as HH:MM, such as 04:00.",
                id="evalhub.E003",
            )
        )
    # django-q2 keeps a daily schedule at the same *local* wall time of Q_CLUSTER["time_zone"]
    # (default TIME_ZONE): anywhere but UTC, the UTC nightly moves by an hour at every DST change.
    q_time_zone = q_cluster.get("time_zone") or getattr(settings, "TIME_ZONE", None) or "UTC"
    if q_time_zone not in UTC_NAMES:
        errors.append(
            Error(
                f"django-q2 schedules daily tasks in {q_time_zone}, so the nightly set by "
                "EVALHUB_NIGHTLY_TIME_UTC would move by an hour at each daylight-saving change.",
                hint='Set Q_CLUSTER["time_zone"] = "UTC" (TIME_ZONE may stay local for display).',
                id="evalhub.E005",
            )
        )
    from runs.signal import signal_config

    try:
        signal_config()
    except ValueError as exc:
        errors.append(
            Error(
                f"The signal settings are not usable: {exc}.",
                hint="EVALHUB_SIGNAL_RECENT_NIGHTS and EVALHUB_SIGNAL_BASELINE_NIGHTS are whole numbers of at least 1; "
                "EVALHUB_SIGNAL_ALPHA is a level above 0 and at most 0.5.",
                id="evalhub.E012",
            )
        )
    public_url_problem = _public_url_problem(str(evalhub_setting("PUBLIC_URL") or ""))
    if public_url_problem:
        errors.append(
            Error(
                f"EVALHUB_PUBLIC_URL {public_url_problem}; it is the base of the run links every alert carries.",
                hint="Set it to this site's address, such as https://evalhub.example.com, or unset it.",
                id="evalhub.E011",
            )
        )
    seed = evalhub_setting("SCHEDULE_SEED")
    if not isinstance(seed, str) or not seed.strip():
        errors.append(Error("EVALHUB_SCHEDULE_SEED must not be blank.", id="evalhub.E004"))
    elif secret_kinds(seed):
        errors.append(
            Error(
                "EVALHUB_SCHEDULE_SEED looks like a secret; it is stored and shown on every schedule.",
                hint="Use a plain name such as runner-live-seven-week-v1.",
                id="evalhub.E004",
            )
        )
    return errors


def _public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the site's public address (alerts link to it, and a channel shows
    it to every reader), or None: an http(s) address of a host, with no user or password."""
    if not url.strip():
        return None
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 — raises ValueError for a port that is not a number
    except ValueError:
        return "is not a URL"
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return "must be an http(s) address of a host"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user or a password"
    return None


@register()
def check_live_runtimes(app_configs=None, **kwargs) -> list[CheckMessage]:
    """What every registered executor says of its configuration and what it needs installed
    (``runs.executors.system_checks``): for the live ones, the model provider profiles must be
    valid (E006, E007) and the runtimes installed (W001).

    A missing runtime is a warning, not an error: a machine that only plans, scores and reports
    (or whose candidates lack credentials) never starts one, and an execution that needs it
    reports ``runtime_missing`` itself.
    """
    from runs.executors import system_checks

    return system_checks()


#: How to make a key the deployment checks accept (``token_urlsafe(50)``: 67 characters).
SECRET_KEY_HINT = (
    'Set DJANGO_SECRET_KEY to a long random value, e.g. the output of `python -c "import secrets; print(secrets.token_urlsafe(50))"`.'
)


def secret_key_weakness(key: str) -> str:
    """Why Django's ``check --deploy`` would call ``key`` weak (its W009), or ``""`` if it would not:
    e.g. ``"5 characters, 4 different"`` or ``"Django's django-insecure- prefix"``."""
    if key.startswith(SECRET_KEY_INSECURE_PREFIX):
        return f"Django's {SECRET_KEY_INSECURE_PREFIX} prefix"
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        return f"{len(key)} characters, {len(set(key))} different"
    return ""


@register()
def check_deployment(app_configs=None, **kwargs) -> list[Error]:
    """A server other people reach must not sign sessions with the key everyone has read.

    E008: the built-in secret key with DEBUG off and either the production profile or any
    allowed host beyond this machine. E010, on the same servers: any other key that Django's
    ``check --deploy`` would call weak (its W009: shorter than 50 characters, fewer than 5
    different ones, or Django's ``django-insecure-`` prefix), refused here rather than warned
    about, since a guessable key lets anyone forge a session. E009 (production profile only):
    local-only allowed hosts (nobody could reach it) or DEBUG on (tracebacks to the world). ``evalhub/wsgi.py`` runs these
    checks when gunicorn loads the app, so such a server refuses to start.
    """
    errors: list[Error] = []
    production = getattr(settings, "PRODUCTION", False)
    hosts = [str(host).strip().lower() for host in settings.ALLOWED_HOSTS]
    local_only = all(host in LOCAL_HOSTS for host in hosts)
    shared = not settings.DEBUG and (production or not local_only)
    key = str(settings.SECRET_KEY)
    if shared and key == EMBEDDED_SECRET_KEY:
        errors.append(
            Error(
                "This server would sign sessions with evalhub's built-in secret key, which anyone can read in the source.",
                hint=SECRET_KEY_HINT,
                id="evalhub.E008",
            )
        )
    elif shared and (weakness := secret_key_weakness(key)):
        errors.append(
            Error(
                f"This server's secret key is weak ({weakness}): anyone who guesses it can forge a session. A shared "
                f"server needs at least {SECRET_KEY_MIN_LENGTH} characters, {SECRET_KEY_MIN_UNIQUE_CHARACTERS} of them different.",
                hint=SECRET_KEY_HINT,
                id="evalhub.E010",
            )
        )
    if production and local_only:
        errors.append(
            Error(
                f"The production profile allows only local host names ({', '.join(hosts) or 'none'}): nobody else could reach it.",
                hint="Set EVALHUB_ALLOWED_HOSTS to the names people use, e.g. evalhub.example.com.",
                id="evalhub.E009",
            )
        )
    if production and settings.DEBUG:
        errors.append(
            Error(
                "The production profile runs with DEBUG on: error pages would show settings and tracebacks to anyone.",
                hint="Unset EVALHUB_DEBUG (or set it to false).",
                id="evalhub.E009",
            )
        )
    return errors
