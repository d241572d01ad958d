"""Access to the reference material the tests compare evalhub against.

Inputs (the candidate manifest and the workflow-case catalog) come from the project's own copies
in ``evalhub/reference_data/``, because that is the product data. Expected outputs of the
reference implementation (the golden vectors and the scoring vectors) are copied into
``tests/fixtures/reference/``: the suite reads only files inside the repository, so a bare clone
passes on its own. Files are read once; every call returns a fresh deep copy, so a test may change
what it gets without affecting the others.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DATA_DIR = REPO_ROOT / "evalhub" / "reference_data"
#: The reference implementation's recorded outputs, copied into the repository.
VECTORS_DIR = Path(__file__).resolve().parent / "fixtures" / "reference"


@cache
def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def golden_vectors() -> dict[str, Any]:
    """The reference implementation's schedule outputs (``golden-vectors.json``)."""
    return copy.deepcopy(_read_json(VECTORS_DIR / "golden-vectors.json"))


def scoring_vectors() -> dict[str, Any]:
    """The reference implementation's scoring and report outputs (``scoring-vectors.json``)."""
    return copy.deepcopy(_read_json(VECTORS_DIR / "scoring-vectors.json"))


def reference_manifest_path() -> Path:
    """The reference candidate manifest (the project ships it unchanged)."""
    return REFERENCE_DATA_DIR / "candidate-manifest.json"


def reference_manifest_slots() -> list[dict[str, Any]]:
    """The project's candidate slots, in order: ``[{"id", "candidates": [...]}, ...]``."""
    manifest = _read_json(REFERENCE_DATA_DIR / "candidate-manifest.json")
    return copy.deepcopy(manifest["slots"])


def reference_cases() -> list[dict[str, Any]]:
    """The project's twelve workflow cases, in catalog order."""
    catalog = _read_json(REFERENCE_DATA_DIR / "workflow-cases.json")
    return copy.deepcopy(catalog["cases"])
