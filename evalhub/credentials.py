"""Which values of the process environment are credentials, so that they are scrubbed everywhere.

evalhub stores variable *names*; the values of the variables in use must never reach a row, a
log, stderr, a page or a task row. A runtime only ever sees an allow-list of host variables plus
its candidate's own (``runs.executors.live.session.runtime_environment``); everything a run
*writes* is redacted with :func:`credential_values` of the process on top of the secret shapes
(``evalhub.secrets``), because a provider echoes a key in an error and an executor may dump its
whole environment.

A variable counts as a credential when its name says so — an ``_``-delimited segment such as
``API_KEY``, ``TOKEN``, ``SECRET``, ``AUTH``; a name ending in ``_KEY``; ``PASSWORD``, ``PASSWD`` or
``PASSPHRASE`` anywhere (``PGPASSWORD``, ``SSH_KEY_PASSPHRASE``) — and, for every variable, the
password inside a URL value (``DATABASE_URL=postgres://user:pw@host/db``, ``REDIS_URL``).

Pure functions over a mapping: no Django, no ``os.environ`` unless passed in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit

#: Names whose values are credentials (compared upper-cased).
CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_KEY|PRIVATE_KEY|AUTH|AUTHORIZATION|COOKIE|SECRET|SESSION|TOKEN|CREDENTIALS?)(?:_|$)"
    r"|_KEY$|^KEY$|PASSWORD|PASSWD|PASSPHRASE"
)
#: A URL carrying user information: ``scheme://user:password@host``.
_URL_WITH_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*:[^/@\s]*@")


def is_credential_name(name: str) -> bool:
    """Whether the variable ``name`` holds a credential by its name (see the module docstring)."""
    return bool(CREDENTIAL_NAME.search(str(name).upper()))


def url_password(value: str) -> str | None:
    """The password inside a URL value (``postgres://u:pw@h/db`` → ``pw``, percent-decoded as the
    client reads it), or None when the value is not a URL with one."""
    text = str(value).strip()
    if not _URL_WITH_PASSWORD.match(text):
        return None
    try:
        password = urlsplit(text).password
    except ValueError:
        return None
    return password or None


def credential_values(environ: Mapping[str, str], *, names: Iterable[str] = ()) -> list[str]:
    """The values to redact for ``environ``: every credential-named variable's value, the
    variables listed in ``names`` (a candidate's required variables), and the password of every
    URL value (raw and percent-decoded). Sorted, without duplicates or empty strings."""
    values: set[str] = set()
    wanted = set(names)
    for name, value in environ.items():
        if not isinstance(value, str) or not value:
            continue
        credential, passwords = _variable_values(name, value)
        if credential or name in wanted:
            values.add(value)
        values.update(passwords)
    return sorted(values)


@functools.lru_cache(maxsize=1024)
def _variable_values(name: str, value: str) -> tuple[bool, tuple[str, ...]]:
    """``(credential-named, the URL value's password raw and percent-decoded)`` of one variable:
    every execution of a worker asks of the same environment (a variable whose name or value
    changes is a new key)."""
    password = url_password(value)
    return is_credential_name(name), (password, unquote(password)) if password else ()


#: Variables a candidate may not require, by exact name, with why (see :func:`reserved_name_reason`).
_RESERVED_NAMES: dict[str, str] = {
    "DATABASE_URL": "evalhub's own settings read it (evalhub/settings.py)",
    "REDIS_URL": "evalhub's own settings read it (evalhub/settings.py)",
    "NODE_OPTIONS": "it changes how the runtime's interpreter starts (code injection)",
    "NODE_PATH": "it changes how the runtime's interpreter starts (code injection)",
    "BASH_ENV": "it changes how the runtime's shells start (code injection)",
    "ENV": "it changes how the runtime's shells start (code injection)",
    "PATH": "the harness sets it itself",
    "HOME": "the harness sets it itself",
    "TMPDIR": "the harness sets it itself",
    "TMP": "the harness sets it itself",
    "TEMP": "the harness sets it itself",
    "PWD": "the harness sets it itself",
    "SHELL": "the harness sets it itself",
    "USER": "the harness sets it itself",
    "LOGNAME": "the harness sets it itself",
    "LANG": "the harness sets it itself",
    "TZ": "the harness sets it itself",
    "SSL_CERT_FILE": "the harness sets it itself",
    "SSL_CERT_DIR": "the harness sets it itself",
}
#: Variables a candidate may not require, by prefix, with why.
_RESERVED_PREFIXES: tuple[tuple[str, str], ...] = (
    ("DJANGO_", "evalhub's own settings read DJANGO_* variables (evalhub/settings.py)"),
    ("EVALHUB_", "evalhub's own settings read EVALHUB_* variables (evalhub/settings.py)"),
    ("LD_", "LD_* variables change how the dynamic loader starts every program (code injection)"),
    ("DYLD_", "DYLD_* variables change how the dynamic loader starts every program (code injection)"),
    ("PYTHON", "PYTHON* variables change how the Python interpreter starts (code injection)"),
    ("XDG_", "the harness sets the XDG_* folders itself"),
    ("LC_", "the harness sets the LC_* locale variables itself"),
)


def reserved_name_reason(name: str) -> str | None:
    """Why a candidate may not require the variable ``name``, or ``None`` when it may.

    A runtime under test is third-party code: the values of a candidate's required variables are
    copied into its environment (``runs.executors.live.session.runtime_environment``). So evalhub's
    own settings (``DJANGO_*``, ``EVALHUB_*``, ``DATABASE_URL``, ``REDIS_URL``: the secret key, the
    database password), variables that make the dynamic loader or an interpreter run other code
    (``LD_*``, ``DYLD_*``, ``PYTHON*``, ``NODE_OPTIONS``) and the process basics the harness sets
    itself (``PATH``, ``HOME``, ``TMPDIR``, ``XDG_*``, the allow-listed locale and certificates) are
    never a candidate's. Compared as written: names are upper-case (``ENV_NAME_PATTERN``).
    """
    text = str(name)
    if text in _RESERVED_NAMES:
        return _RESERVED_NAMES[text]
    for prefix, reason in _RESERVED_PREFIXES:
        if text.startswith(prefix):
            return reason
    return None
