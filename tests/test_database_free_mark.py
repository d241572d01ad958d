"""The ``database_free`` and ``runtime`` marks cannot hide a test that uses the database (tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.conftest import pytest_collection_modifyitems

pytestmark = pytest.mark.database_free


@dataclass
class _Item:
    nodeid: str
    marks: set[str]
    fixturenames: list[str] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


@pytest.mark.parametrize(
    "item",
    [
        _Item("tests/test_x.py::test_db", {"database_free"}, ["db"]),
        _Item("tests/test_x.py::test_tx", {"database_free"}, ["transactional_db", "settings"]),
        _Item("tests/test_x.py::test_live", {"database_free"}, ["live_server"]),
        _Item("tests/test_x.py::test_marked", {"database_free", "django_db"}),
    ],
    ids=lambda item: item.nodeid.rsplit("::", 1)[1],
)
def test_a_database_free_test_that_asks_for_the_database_is_refused_by_name(item: _Item) -> None:
    with pytest.raises(pytest.UsageError, match="marked database_free but uses the database") as refused:
        pytest_collection_modifyitems(None, [_Item("tests/test_x.py::test_pure", {"database_free"}, ["tmp_path"]), item])  # type: ignore[arg-type]
    assert item.nodeid in str(refused.value) and "test_pure" not in str(refused.value)


def test_database_free_tests_and_database_tests_without_the_mark_pass() -> None:
    items = [
        _Item("tests/test_x.py::test_pure", {"database_free"}, ["tmp_path"]),
        _Item("tests/test_x.py::test_db", set(), ["db"]),
        _Item("tests/test_x.py::test_marked", {"django_db"}),
    ]
    pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "item",
    [
        _Item("tests/test_x.py::test_db", {"runtime"}, ["db", "tmp_path"]),
        _Item("tests/test_x.py::test_marked", {"runtime", "django_db"}),
    ],
    ids=lambda item: item.nodeid.rsplit("::", 1)[1],
)
def test_a_runtime_test_that_asks_for_the_database_is_refused_too(item: _Item) -> None:
    """CI's PostgreSQL pass leaves ``runtime`` tests out as well: a test that drives a runtime and
    records what it did in the database stays unmarked, and runs on both databases."""
    with pytest.raises(pytest.UsageError, match="marked runtime but uses the database") as refused:
        pytest_collection_modifyitems(None, [_Item("tests/test_x.py::test_cli", {"runtime"}, ["tmp_path"]), item])  # type: ignore[arg-type]
    assert item.nodeid in str(refused.value) and "test_cli" not in str(refused.value)
