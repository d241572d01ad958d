"""Lazy access to the project's knobs in ``settings.EVALHUB``, falling back to ``evalhub.defaults``."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from evalhub.defaults import DEFAULTS


def evalhub_setting(name: str) -> Any:
    """The value of ``settings.EVALHUB[name]``, falling back to evalhub's default.

    Raises ``KeyError`` for a name evalhub does not know, so a typo fails loudly.
    """
    if name not in DEFAULTS:
        raise KeyError(f"unknown evalhub setting {name!r}")
    return getattr(settings, "EVALHUB", {}).get(name, DEFAULTS[name])
