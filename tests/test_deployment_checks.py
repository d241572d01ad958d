"""A server other people reach refuses the built-in secret key and a weak one (evalhub.E010), and the production profile refuses
local-only hosts and DEBUG (evalhub.E008, evalhub.E009); the profile itself switches on HTTPS only."""

from __future__ import annotations

import os
import subprocess

import pytest

from evalhub.checks import check_deployment
from evalhub.defaults import EMBEDDED_SECRET_KEY
from tests.test_sqlite_concurrency import PYTHON, REPO

REAL_KEY = "k" * 20 + "-a-long-random-value-0123456789abcdefXYZ"


def ids(settings) -> list[str]:
    return [error.id for error in check_deployment()]


def test_the_embedded_default_passes(settings) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = (
        EMBEDDED_SECRET_KEY,
        ["localhost", "127.0.0.1"],
        False,
        False,
    )
    assert ids(settings) == []


def test_a_shared_server_on_the_built_in_key_is_refused(settings) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = (
        EMBEDDED_SECRET_KEY,
        ["evalhub.example.com"],
        False,
        False,
    )
    (error,) = check_deployment()
    assert error.id == "evalhub.E008" and "built-in secret key" in error.msg and "DJANGO_SECRET_KEY" in error.hint


def test_debug_on_a_local_machine_may_use_the_built_in_key(settings) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = (
        EMBEDDED_SECRET_KEY,
        ["evalhub.example.com"],
        False,
        True,
    )
    assert ids(settings) == []


@pytest.mark.parametrize(
    ("key", "hosts", "debug", "expected"),
    [
        (EMBEDDED_SECRET_KEY, ["evalhub.example.com"], False, ["evalhub.E008"]),
        (REAL_KEY, ["localhost", "127.0.0.1"], False, ["evalhub.E009"]),
        (REAL_KEY, [], False, ["evalhub.E009"]),
        (REAL_KEY, ["evalhub.example.com"], True, ["evalhub.E009"]),
        (EMBEDDED_SECRET_KEY, ["LOCALHOST"], False, ["evalhub.E008", "evalhub.E009"]),
        (REAL_KEY, ["evalhub.example.com", "127.0.0.1"], False, []),
    ],
)
def test_the_production_profile_refuses_what_would_be_unsafe(settings, key, hosts, debug, expected) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = key, hosts, True, debug
    assert ids(settings) == expected


@pytest.mark.parametrize(
    ("key", "weakness"),
    [
        ("short", "5 characters, 5 different"),
        ("x" * 49 + "y", "50 characters, 2 different"),
        ("a-random-value-0123456789abcdefXYZ", "34 characters, 27 different"),
        ("abcd" * 20, "80 characters, 4 different"),
        ("django-insecure-" + "0123456789abcdef" * 4, "Django's django-insecure- prefix"),
    ],
)
def test_a_shared_server_on_a_weak_key_is_refused(settings, key: str, weakness: str) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = key, ["evalhub.example.com"], True, False
    (error,) = check_deployment()
    assert error.id == "evalhub.E010"
    assert error.msg == (
        f"This server's secret key is weak ({weakness}): anyone who guesses it can forge a session. "
        "A shared server needs at least 50 characters, 5 of them different."
    )
    assert "secrets.token_urlsafe(50)" in error.hint


@pytest.mark.parametrize("key", [REAL_KEY, "abcde" * 10])
def test_a_key_of_50_characters_5_different_is_accepted(settings, key: str) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = key, ["evalhub.example.com"], True, False
    assert ids(settings) == []


def test_a_local_machine_may_use_a_short_key(settings) -> None:
    settings.SECRET_KEY, settings.ALLOWED_HOSTS, settings.PRODUCTION, settings.DEBUG = "short", ["localhost"], False, False
    assert ids(settings) == []


def production_environment(**extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("EVALHUB_", "DJANGO_"))}
    environment.update({"EVALHUB_ENV": "production", "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "evalhub.settings"})
    environment.update(extra)
    return environment


def settings_in(environment: dict[str, str], *names: str) -> list[str]:
    code = "import django; django.setup(); from django.conf import settings; " + "; ".join(f"print(repr(settings.{n}))" for n in names)
    done = subprocess.run([str(PYTHON), "-c", code], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_one_setting_switches_on_https_only_and_collected_static_files() -> None:
    environment = production_environment(DJANGO_SECRET_KEY=REAL_KEY, EVALHUB_ALLOWED_HOSTS="evalhub.example.com")
    names = ("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "WHITENOISE_USE_FINDERS")
    assert settings_in(environment, *names) == ["True", "31536000", "True", "True", "False"]
    assert settings_in({**environment, "EVALHUB_ENV": "development"}, *names) == ["False", "0", "False", "False", "True"]


def test_check_deploy_is_clean_in_the_production_profile() -> None:
    environment = production_environment(DJANGO_SECRET_KEY=REAL_KEY, EVALHUB_ALLOWED_HOSTS="evalhub.example.com")
    done = subprocess.run(
        [str(PYTHON), "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "System check identified no issues (0 silenced)."), done.stderr[-3000:]


def test_manage_py_check_refuses_the_production_profile_on_a_short_key() -> None:
    environment = production_environment(DJANGO_SECRET_KEY="short", EVALHUB_ALLOWED_HOSTS="evalhub.example.com")
    done = subprocess.run([str(PYTHON), "manage.py", "check"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "evalhub.E010" in done.stderr and "secret key is weak (5 characters, 5 different)" in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr


def test_an_unknown_profile_is_a_configuration_error() -> None:
    done = subprocess.run(
        [str(PYTHON), "manage.py", "check"],
        cwd=REPO,
        env=production_environment(EVALHUB_ENV="staging"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "EVALHUB_ENV must be development or production, not 'staging'" in done.stderr


def test_the_wsgi_app_refuses_to_load_on_the_built_in_key() -> None:
    environment = production_environment(EVALHUB_ALLOWED_HOSTS="evalhub.example.com")
    done = subprocess.run(
        [str(PYTHON), "-c", "import evalhub.wsgi"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "evalhub.E008" in done.stderr
