"""``manage.py export_manifest``: print the candidate manifest as JSON."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from candidates.services import export_manifest


class Command(BaseCommand):
    help = "Print the candidate manifest (slots in order, each with its candidates in order) as JSON."

    def handle(self, *args, **options) -> None:
        self.stdout.write(json.dumps(export_manifest(), indent=2, ensure_ascii=False))
