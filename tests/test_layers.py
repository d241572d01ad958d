"""The import stack of docs/DESIGN.md holds: ``lint-imports`` keeps every contract in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.database_free

REPO = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    completed = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    assert "0 broken" in completed.stdout
