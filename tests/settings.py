"""The settings the in-process suite runs with (``pyproject.toml``): the project's, with django-q2's
ORM broker and the database cache whatever ``REDIS_URL`` says.

The in-process tests read the queue as the ORM broker keeps it (``django_q.models.OrmQ``) and
share nothing between xdist workers; a developer's ``REDIS_URL`` would have their tasks pushed to
that Redis database's queue and their cache entries written there. The tests that run on Redis on
purpose start processes of their own with a ``REDIS_URL`` of their own, from
``EVALHUB_TEST_REDIS_URL`` (``tests/test_cluster.py``, ``tests/test_production.py``).

Passwords are hashed with MD5: a PBKDF2 hash costs about 0.24 s of CPU and hundreds of tests
create a user. No test here depends on the hasher (sign-in lock-out counts failed attempts, not
hashes); the production profile keeps Django's PBKDF2 (``evalhub/settings.py`` sets none), and the
processes that run it (``tests/test_production.py``, ``tests/test_cluster.py``) do not read this
module. A test that needs a real hash opts back in (``settings.PASSWORD_HASHERS = ...`` with
pytest-django's ``settings`` fixture, or ``override_settings``)."""

from __future__ import annotations

from evalhub.settings import *  # noqa: F403
from evalhub.settings import Q_CLUSTER

REDIS_URL = ""
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "evalhub_cache"}}
Q_CLUSTER = {**{key: value for key, value in Q_CLUSTER.items() if key != "redis"}, "orm": "default"}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
