"""``manage.py export_manifest``: print the candidate manifest as JSON."""

from __future__ import annotations

import json

from candidates.services import export_manifest
from evalhub.commands import DatabaseCommand


class Command(DatabaseCommand):
    help = "Print the candidate manifest (slots in order, each with its candidates in order) as JSON."

    def handle(self, *args, **options) -> None:
        self.stdout.write(json.dumps(export_manifest(), indent=2, ensure_ascii=False))
