"""Model provider profiles: where a live execution's runtime sends its model requests.

``settings.EVALHUB["MODEL_PROVIDERS"]`` maps a profile name to ``{"base_url", "wire_api",
"env_key", "scripted"?}``; ``EVALHUB_MODEL_PROVIDERS`` (a JSON object of the same shape) overrides
or adds profiles. A candidate names its profile in ``qualification.profile``; without one it uses
``DEFAULT_PROVIDER_PROFILES[provider]``. Only the *name* of the key variable is configuration:
its value comes from the execution's environment when the runtime starts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from candidates.secrets import secret_kinds
from evalhub.conf import evalhub_setting
from evalhub.jsonio import loads_strict
from runs.harness.contracts import ProviderConfig

WIRE_APIS = ("responses", "chat")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_PROFILE_KEYS = {"base_url", "wire_api", "env_key"}


class ProviderSettingsError(ValueError):
    """The provider profiles in the settings are malformed; the message says what to fix."""


def _validate_profile(name: str, profile: Any, *, internal: bool = False) -> ProviderConfig:
    where = f"model provider profile {name!r}"
    if not isinstance(profile, Mapping):
        raise ProviderSettingsError(f"{where} must be an object with base_url, wire_api and env_key")
    # "scripted" (a free endpoint, never history) is evalhub's own to set (demo_live): from the
    # settings it would make a paid endpoint's spend a known $0.
    unknown = sorted(set(profile) - _PROFILE_KEYS - ({"scripted"} if internal else set()))
    if unknown:
        raise ProviderSettingsError(f"{where} has unknown keys {', '.join(unknown)}; allowed: {', '.join(sorted(_PROFILE_KEYS))}")
    base_url = profile.get("base_url")
    if not isinstance(base_url, str) or urlsplit(base_url.replace("{", "").replace("}", "")).scheme not in {"http", "https"}:
        raise ProviderSettingsError(f"{where}: base_url must be an http(s) URL such as https://api.openai.com/v1")
    if secret_kinds(base_url):
        raise ProviderSettingsError(f"{where}: base_url looks like it holds a secret; put the key in a variable and name it in env_key")
    wire_api = profile.get("wire_api", "responses")
    if wire_api not in WIRE_APIS:
        raise ProviderSettingsError(f"{where}: wire_api must be one of {', '.join(WIRE_APIS)}, not {wire_api!r}")
    env_key = profile.get("env_key")
    if env_key is not None and (not isinstance(env_key, str) or not _ENV_NAME.match(env_key)):
        raise ProviderSettingsError(
            f"{where}: env_key must be the NAME of an environment variable (such as OPENAI_API_KEY), not its value"
        )
    scripted = profile.get("scripted", False)
    if not isinstance(scripted, bool):
        raise ProviderSettingsError(f"{where}: scripted must be true or false")
    return ProviderConfig(profile=name, base_url=base_url, wire_api=wire_api, env_key=env_key, scripted=scripted)


def provider_profiles() -> dict[str, ProviderConfig]:
    """Every configured profile, validated. Raises :class:`ProviderSettingsError`."""
    raw: dict[str, Any] = dict(evalhub_setting("MODEL_PROVIDERS") or {})
    override = (evalhub_setting("MODEL_PROVIDERS_JSON") or "").strip()
    if override:
        try:
            extra = loads_strict(override)
        except ValueError as exc:
            raise ProviderSettingsError(f"EVALHUB_MODEL_PROVIDERS is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise ProviderSettingsError("EVALHUB_MODEL_PROVIDERS must be a JSON object: {profile: {base_url, wire_api, env_key}}")
        raw.update(extra)
    profiles = {name: _validate_profile(name, profile) for name, profile in raw.items()}
    scripted = evalhub_setting("SCRIPTED_PROVIDER")
    if scripted:  # set only by scripted_settings(): it wins over any profile of the same name
        profiles[SCRIPTED_PROFILE] = _validate_profile(SCRIPTED_PROFILE, scripted, internal=True)
    return profiles


def provider_for(candidate: Mapping[str, Any]) -> ProviderConfig:
    """The provider profile a candidate document uses.

    Raises :class:`ProviderSettingsError` when the profile is unknown or the settings are malformed.
    """
    qualification = candidate.get("qualification") or {}
    forced = (evalhub_setting("FORCED_PROVIDER_PROFILES") or {}).get(candidate.get("provider"))
    name = forced or qualification.get("profile") or (evalhub_setting("DEFAULT_PROVIDER_PROFILES") or {}).get(candidate.get("provider"))
    profiles = provider_profiles()
    if not name or name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ProviderSettingsError(
            f"candidate {candidate.get('id')} uses model provider profile {name!r}, which is not configured "
            f"(known: {known}); add it to EVALHUB_MODEL_PROVIDERS"
        )
    return profiles[name]


SCRIPTED_PROFILE = "scripted"


@contextlib.contextmanager
def scripted_settings(base_url: str, *, providers: Sequence[str]) -> Iterator[ProviderConfig]:
    """Within the block, candidates of ``providers`` talk to a scripted model at ``base_url``
    (profile ``scripted``, ``scripted: true``) whatever profile they name; the key variable stays
    the one the candidate requires (``OPENAI_API_KEY`` for Codex). Used by ``manage.py demo_live``.
    """
    original = settings.EVALHUB
    profile = {"base_url": base_url, "wire_api": "responses", "env_key": "OPENAI_API_KEY", "scripted": True}
    settings.EVALHUB = {
        **original,
        "SCRIPTED_PROVIDER": profile,
        "FORCED_PROVIDER_PROFILES": {provider: SCRIPTED_PROFILE for provider in providers},
    }
    try:
        yield _validate_profile(SCRIPTED_PROFILE, profile, internal=True)
    finally:
        settings.EVALHUB = original
