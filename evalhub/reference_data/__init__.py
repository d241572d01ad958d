"""The reference data shipped with evalhub (copied from the reference system, read at run time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent


def load(name: str) -> Any:
    """The parsed JSON of one shipped reference file, e.g. ``load("candidate-manifest.json")``."""
    with (DATA_DIR / name).open(encoding="utf-8") as handle:
        return json.load(handle)
