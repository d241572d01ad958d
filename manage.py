#!/usr/bin/env python
"""Django's command-line utility for evalhub."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad environment variable: one line saying which and what to fix, not a traceback.
        sys.stderr.write(f"evalhub is not configured correctly: {exc}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
