"""Read-side queries for the candidates page: the line-up with qualification status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from candidates.models import Candidate, Slot
from candidates.services import catalog_queryset


@dataclass(frozen=True)
class VariableStatus:
    """A required environment variable's name and whether it is set (non-empty). Never its value."""

    name: str
    is_set: bool


@dataclass(frozen=True)
class CandidateRow:
    candidate: Candidate
    plays_this_week: bool
    environment: list[VariableStatus]

    @property
    def qualified(self) -> bool:
        return all(variable.is_set for variable in self.environment)


@dataclass(frozen=True)
class SlotRow:
    slot: Slot
    candidates: list[CandidateRow]


def catalog_overview(*, environ: Mapping[str, str], rotation_day: int) -> list[SlotRow]:
    """Slots in order with their candidates (two queries). A variable set to an empty string
    counts as missing, as it does when a run qualifies a candidate (known-failure-modes B8)."""
    rows = []
    for slot in catalog_queryset():
        candidates = list(slot.candidates.all())
        playing = candidates[rotation_day % len(candidates)] if candidates else None
        rows.append(
            SlotRow(
                slot,
                [
                    CandidateRow(
                        candidate,
                        candidate is playing,
                        [
                            VariableStatus(name, bool(environ.get(name)))
                            for name in (candidate.required_environment if isinstance(candidate.required_environment, list) else [])
                            if isinstance(name, str)
                        ],
                    )
                    for candidate in candidates
                ],
            )
        )
    return rows
