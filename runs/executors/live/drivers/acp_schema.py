"""Frames of an ACP agent checked against the Agent Client Protocol schema.

The schema is the ``agent-client-protocol`` package's (module ``acp.schema``: pydantic models
generated from the protocol's JSON Schema). evalhub's own stdio peer carries the frames (every raw
line traced); these helpers only say whether a frame the agent sent is what the protocol allows,
so the driver can interpret one that is not as ``rejected`` instead of guessing at it.

Each helper returns ``None`` for a valid frame, else a short text naming the first problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp import schema
from pydantic import BaseModel, ValidationError

#: The response model of each client→agent request whose answer the driver reads.
RESPONSES: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/set_mode": schema.SetSessionModeResponse,
    "session/prompt": schema.PromptResponse,
}


def _problem(model: type[BaseModel], data: Any) -> str | None:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(frame)"
        return f"{where}: {first.get('msg')}"
    return None


def response_problem(method: str, result: Mapping[str, Any]) -> str | None:
    """Whether ``result`` is a valid answer to ``method`` (methods without a model are not checked)."""
    model = RESPONSES.get(method)
    return _problem(model, dict(result)) if model is not None else None


def notification_problem(params: Mapping[str, Any]) -> str | None:
    """Whether ``params`` are a valid ``session/update`` notification (``SessionNotification``)."""
    return _problem(schema.SessionNotification, dict(params))


def permission_problem(params: Mapping[str, Any]) -> str | None:
    """Whether ``params`` are a valid ``session/request_permission`` (``RequestPermissionRequest``)."""
    return _problem(schema.RequestPermissionRequest, dict(params))
