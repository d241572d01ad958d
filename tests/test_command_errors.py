"""A command's error quotes what was typed; a key pasted into the wrong argument is redacted there
(evalhub/commands.py DatabaseCommand), as a bad setting never quotes a secret-shaped value."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

KEY = "sk-proj-" + "Abcdefghijklmnopqrstuvwxyz0123456789ABCDxyz"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("chaos", KEY), "unknown chaos scenario [REDACTED]: use one of chaos-restart"),
        (("cancel_run", KEY), "argument run_id: invalid int value: '[REDACTED]'"),
        (("rerun", KEY, "--skipped"), "argument run_id: invalid int value: '[REDACTED]'"),
        (("nightly", f"--limit={KEY}"), "--limit must be a positive whole number, not '[REDACTED]'"),
    ],
)
def test_a_key_typed_as_an_argument_is_not_quoted_back(reference_catalog, args: tuple[str, ...], said: str) -> None:
    with pytest.raises(CommandError) as caught:
        call_command(*args)
    assert KEY not in str(caught.value)
    assert said in str(caught.value)


@pytest.mark.django_db
def test_an_error_without_a_secret_is_unchanged_with_its_exit_status() -> None:
    with pytest.raises(CommandError) as caught:
        call_command("cancel_run", "999999")
    assert (str(caught.value), caught.value.returncode) == ("there is no run 999999", 1)
