"""An import-linter contract type the built-in ones lack: an allow-list of what a package imports.

import-linter's ``forbidden`` contract is a block-list (a module added to the app later is not
in it), ``protected`` says who may import a package, not what it may import, and ``layers``
orders whole packages. ``allowed_imports`` says, of the project's own modules (the
``root_packages``), which ones ``source_modules`` may import: themselves and ``allowed_modules``
(each as a package, its descendants included), nothing else. Third-party and standard-library
imports are left to the other contracts (the harness contract forbids Django in the live
harness). Registered in ``pyproject.toml`` (``contract_types``); lint-imports runs from the
project's root, so this module is importable as ``tests.import_contracts``.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter import Contract, ContractCheck, fields, output


class AllowedImportsContract(Contract):
    """Options: ``source_modules`` and ``allowed_modules`` (module names, each as a package)."""

    type_name = "allowed_imports"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Broken by every direct import from a source module into a root package's module that is
        neither a source nor an allowed module; the metadata lists them (importer, imported, lines)."""
        roots = self.session_options.get("root_packages") or [self.session_options["root_package"]]
        sources = [module.name for module in self.source_modules]  # type: ignore[attr-defined]
        allowed = [*sources, *(module.name for module in self.allowed_modules)]  # type: ignore[attr-defined]

        def within(name: str, packages: list[str]) -> bool:
            return any(name == package or name.startswith(package + ".") for package in packages)

        illegal: list[dict[str, Any]] = []
        for source in sources:
            for importer in sorted({source, *graph.find_descendants(source)}):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    if within(imported, roots) and not within(imported, allowed):
                        details = graph.get_import_details(importer=importer, imported=imported)
                        lines = sorted(detail["line_number"] for detail in details)
                        illegal.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error("Imports outside the allow-list:", bold=False)
        output.new_line()
        for link in check.metadata["illegal"]:
            output.print_error(f"- {link['importer']} -> {link['imported']} (l.{', '.join(map(str, link['lines']))})", bold=False)
            output.new_line()
