"""Model provider profiles: where an execution's runtime sends its model requests.

The provider configuration belongs to the executors as a whole, not to one plugin: an
:class:`runs.executors.base.ExecutionRequest` carries one (the scripted lane's override), the
orchestration stores the overrides on the run (``Run.provider_overrides``), and the live executor
resolves a candidate's own.

A profile maps a name to ``{"base_url", "wire_api", "env_key"}``; the configured profiles
(``settings.EVALHUB["MODEL_PROVIDERS"]``) are overridden or extended by ``EVALHUB_MODEL_PROVIDERS``
(a JSON object of the same shape). A candidate names its profile in ``qualification.profile``;
without one it uses the default profile of its provider. Only the *name* of the key variable is
configuration: its value comes from the execution's environment when the runtime starts.

Pure: the executor and ``manage.py check`` read the settings and pass them in. A scripted
endpoint (``scripted: true``: a free endpoint, never history) is never configured: evalhub builds
it with :func:`scripted_provider` for the scripted lane and hands it to the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from evalhub.jsonio import loads_strict
from evalhub.secrets import secret_kinds
from runs.executors.candidate import CandidateSpec

#: OpenAI Responses, OpenAI Chat Completions, Anthropic Messages.
WIRE_APIS = ("responses", "chat", "messages")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_PROFILE_KEYS = {"base_url", "wire_api", "env_key"}


@dataclass(frozen=True)
class ProviderConfig:
    """Where a candidate's model lives: a model provider profile.

    ``base_url`` may contain ``{case_id}`` and ``{execution_id}`` placeholders (the scripted model
    server uses them to pick a script). ``wire_api`` is ``responses``, ``chat`` or ``messages``;
    ``env_key`` is the *name* of the variable holding the key (its value comes from the
    execution's environment, never from settings); ``scripted`` marks a scripted (not measured)
    endpoint. :meth:`to_document` and :meth:`from_document` are the JSON stored on a run.
    """

    profile: str
    base_url: str
    wire_api: str = "responses"
    env_key: str | None = None
    scripted: bool = False

    def to_document(self) -> dict[str, Any]:
        """``{profile, base_url, wire_api, env_key, scripted}`` (names and URLs only, never a key)."""
        return {
            "profile": self.profile,
            "base_url": self.base_url,
            "wire_api": self.wire_api,
            "env_key": self.env_key,
            "scripted": self.scripted,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ProviderConfig:
        """The profile :meth:`to_document` wrote. Raises ``TypeError`` for unknown or missing keys."""
        return cls(**document)


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
    try:
        parts = urlsplit(base_url.replace("{", "").replace("}", "")) if isinstance(base_url, str) else None
        parts.port if parts is not None else None  # noqa: B018 (reading it checks the port)
    except ValueError:  # "http://[::1" (an unclosed IPv6 host), a port out of range
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ProviderSettingsError(f"{where}: base_url must be an http(s) URL such as https://api.openai.com/v1")
    if secret_kinds(base_url):
        raise ProviderSettingsError(f"{where}: base_url looks like it holds a secret; put the key in a variable and name it in env_key")
    wire_api = profile.get("wire_api", "responses")
    if wire_api not in WIRE_APIS:
        raise ProviderSettingsError(f"{where}: wire_api must be one of {', '.join(WIRE_APIS)}, not {wire_api!r}")
    env_key = profile.get("env_key")
    if env_key is not None and (not isinstance(env_key, str) or not _ENV_NAME.match(env_key)):
        raise ProviderSettingsError(f"{where}: env_key must be the NAME of an environment variable (such as OPENAI_API_KEY), not its value")
    scripted = profile.get("scripted", False)
    if not isinstance(scripted, bool):
        raise ProviderSettingsError(f"{where}: scripted must be true or false")
    return ProviderConfig(profile=name, base_url=base_url, wire_api=wire_api, env_key=env_key, scripted=scripted)


def provider_profiles(configured: Mapping[str, Any], override_json: str = "") -> dict[str, ProviderConfig]:
    """Every profile of ``configured`` (name → profile dict) overlaid with ``override_json`` (the
    text of ``EVALHUB_MODEL_PROVIDERS``), validated. Raises :class:`ProviderSettingsError`."""
    raw: dict[str, Any] = dict(configured or {})
    override = (override_json or "").strip()
    if override:
        try:
            extra = loads_strict(override)
        except ValueError as exc:
            raise ProviderSettingsError(f"EVALHUB_MODEL_PROVIDERS is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise ProviderSettingsError("EVALHUB_MODEL_PROVIDERS must be a JSON object: {profile: {base_url, wire_api, env_key}}")
        raw.update(extra)
    return {name: _validate_profile(name, profile) for name, profile in raw.items()}


def provider_for(
    candidate: CandidateSpec, *, profiles: Mapping[str, ProviderConfig], default_profiles: Mapping[str, str]
) -> ProviderConfig:
    """The provider profile a candidate uses: its qualification's ``profile``, else
    ``default_profiles[candidate provider]``. For an ``acpx`` candidate the qualification profile
    names the ACP agent (``claude``, ``codex``), so its model provider profile is
    ``default_profiles["acpx:<agent>"]``, else ``default_profiles["acpx"]``.

    Raises :class:`ProviderSettingsError` when the profile is not among ``profiles``.
    """
    defaults = default_profiles or {}
    if candidate.provider == "acpx":
        name = defaults.get(f"acpx:{candidate.profile}") or defaults.get("acpx")
    else:
        name = candidate.profile or defaults.get(candidate.provider)
    if not name or name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ProviderSettingsError(
            f"candidate {candidate.id} uses model provider profile {name!r}, which is not configured "
            f"(known: {known}); add it to EVALHUB_MODEL_PROVIDERS"
        )
    return profiles[name]


SCRIPTED_PROFILE = "scripted"


def scripted_provider(base_url: str, *, wire_api: str = "responses", env_key: str | None = "OPENAI_API_KEY") -> ProviderConfig:
    """The scripted model at ``base_url`` as a profile (``scripted: true``: its spend is a known $0
    and its runs never enter history). ``base_url`` may hold ``{case_id}`` and ``{execution_id}``;
    ``env_key`` is the variable the candidate requires (the scripted model ignores its value).
    Raises :class:`ProviderSettingsError` for a malformed URL or wire API."""
    profile = {"base_url": base_url, "wire_api": wire_api, "env_key": env_key, "scripted": True}
    return _validate_profile(SCRIPTED_PROFILE, profile, internal=True)
