"""Lazy access to the project's knobs in ``settings.EVALHUB``."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "SCHEDULE_SEED": "runner-live-seven-week-v1",
    "MAX_CAMPAIGN_COST_USD": None,
    "NIGHTLY_TIME_UTC": "04:00",
    "EXECUTORS": {},
    "BASELINE_READY": False,
    "RETENTION_DAYS": 120,
    "RUNNER_BUILD": None,
    "MODEL_PROVIDERS": {},
    "MODEL_PROVIDERS_JSON": "",
    "DEFAULT_PROVIDER_PROFILES": {"codex": "openai", "opencode": "openrouter", "acpx": "openai"},
    "FORCED_PROVIDER_PROFILES": {},
    "SCRIPTED_PROVIDER": None,
    "RUNTIME_BINARIES": {},
    "RUNTIME_ENV_ALLOWLIST": ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"],
    "TRACE_CAP_BYTES": 8 * 1024 * 1024,
}


def evalhub_setting(name: str) -> Any:
    """The value of ``settings.EVALHUB[name]``, falling back to evalhub's default.

    Raises ``KeyError`` for a name evalhub does not know, so a typo fails loudly.
    """
    if name not in DEFAULTS:
        raise KeyError(f"unknown evalhub setting {name!r}")
    return getattr(settings, "EVALHUB", {}).get(name, DEFAULTS[name])
