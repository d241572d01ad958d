"""Logging filter that keeps secret-shaped strings out of log output (known-failure-modes B12).

Configured in ``settings.LOGGING`` as ``{"()": "evalhub.logging.RedactSecretsFilter"}``.
"""

from __future__ import annotations

import logging

from candidates.secrets import redact


class RedactSecretsFilter(logging.Filter):
    """Redacts the formatted message, the traceback and the stack of every record it sees.

    The message is formatted with its args, redacted and stored back as ``msg`` with empty
    ``args``. The traceback is rendered into ``exc_text`` (redacted) and ``exc_info`` is
    dropped, so a handler running after this one cannot re-render the exception and its secret.
    The record is changed in place and so stays redacted for every later handler; handlers that
    run *before* the filtered one (or loggers without it) still see the original.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: handleError() would print the raw args
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
