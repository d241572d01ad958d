"""Keeping secrets out of log output and stderr (docs/failure-modes.md B12).

``RedactSecretsFilter`` is configured in ``settings.LOGGING`` as
``{"()": "evalhub.logging.RedactSecretsFilter"}``; :class:`RedactingStream` wraps a text stream
(a worker's ``sys.stderr`` while it executes a run). Both scrub secret shapes and the values of
the process's credential variables (``evalhub.credentials.credential_values``), plus any values
they are given.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Iterable
from typing import TextIO

from evalhub.credentials import credential_values
from evalhub.secrets import redact


def process_secret_values() -> list[str]:
    """The credential values of this process's environment (read when called: a worker's
    environment is the one it runs with)."""
    return credential_values(os.environ)


class RedactSecretsFilter(logging.Filter):
    """Redacts the formatted message, the traceback and the stack of every record it sees.

    The message is formatted with its args, redacted and stored back as ``msg`` with empty
    ``args``. The traceback is rendered into ``exc_text`` (redacted) and ``exc_info`` is
    dropped, so a handler running after this one cannot re-render the exception and its secret.
    The record is changed in place and so stays redacted for every later handler; handlers that
    run *before* the filtered one (or loggers without it) still see the original. Secret shapes
    and the values of the process's credential variables are redacted.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        values = process_secret_values()
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: handleError() would print the raw args
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message, extra_values=values)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text, extra_values=values)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, extra_values=values)
        return True


class RedactingStream(io.TextIOBase):
    """A text stream that writes to ``target`` only whole lines, each redacted with
    ``extra_values`` and the process's credential values; :meth:`flush` writes a pending partial
    line. Thread-safe. A key written in two ``write`` calls on one line is still one line when it
    is scrubbed. The process's credential values are read when the first text is scrubbed (most
    executions write nothing to stderr; reading the environment each time cost more than the rest)."""

    def __init__(self, target: TextIO, extra_values: Iterable[str] = ()) -> None:
        super().__init__()
        self._target = target
        self._extra = list(extra_values)
        self._values_read: list[str] | None = None
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def _values(self) -> list[str]:
        if self._values_read is None:
            self._values_read = [*self._extra, *process_secret_values()]
        return self._values_read

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += str(text)
            if "\n" in self._pending:
                complete, self._pending = self._pending.rsplit("\n", 1)
                self._target.write(redact(complete + "\n", extra_values=self._values))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._target.write(redact(self._pending, extra_values=self._values))
                self._pending = ""
            self._target.flush()

    def fileno(self) -> int:
        return self._target.fileno()

    def isatty(self) -> bool:
        return False
