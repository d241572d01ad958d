"""Exports of a stored report in the formats CI tools already read (upstream-spec §4, §5.3 step 5).

``export_report(report, fmt)`` renders a :class:`runs.models.Report` row without touching the
database again: everything comes from the row's ``document``, ``comparison`` and
``alert_documents`` (stored as text in their original key order, see ``evalhub.fields.DocumentField``),
so an export is the same bytes today and in a year, whatever happened to the history since, on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runs.renderers import (
    render_github_summary,
    render_json,
    render_junit,
    render_markdown,
    render_previous_bundle_section,
)

if TYPE_CHECKING:
    from runs.models import Report

#: format -> (content type, file name suffix)
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "json": ("application/json; charset=utf-8", "live-report.json"),
    "markdown": ("text/markdown; charset=utf-8", "live-report.md"),
    "junit": ("application/xml; charset=utf-8", "live-report.junit.xml"),
    "github": ("text/markdown; charset=utf-8", "github-live-summary.md"),
}


def export_document(
    document: dict[str, Any],
    fmt: str,
    *,
    alerts: list[dict[str, Any]] | None = None,
    comparison: dict[str, Any] | None = None,
) -> str:
    """The text of ``document`` (a report document) in ``fmt``, as the nightly script writes it.

    ``json``: ``render_json({"report", "alerts", "comparison"})`` (``live-report.json``);
    ``markdown`` and ``junit``: the report's renderings; ``github``: the CI summary with
    ``alerts`` plus the "Previous compatible bundle" section for ``comparison``.
    Raises ``ValueError`` for an unknown format.
    """
    alerts = list(alerts or [])
    if fmt == "json":
        return render_json({"report": document, "alerts": alerts, "comparison": comparison})
    if fmt == "markdown":
        return render_markdown(document)
    if fmt == "junit":
        return render_junit(document)
    if fmt == "github":
        return render_github_summary(document, alerts) + render_previous_bundle_section(comparison)
    raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")


def export_report(report: Report, fmt: str) -> tuple[str, str, str]:
    """``(content, content type, file name)`` of ``report`` exported as ``fmt``.

    ``fmt`` is ``json``, ``markdown``, ``junit`` or ``github`` (see :func:`export_document`).
    The file name is ``run-<run id>-<reference file name>``, e.g. ``run-7-live-report.junit.xml``.
    The alerts are the reference's list (``Report.alert_documents``, repetitions included), not
    the de-duplicated ``Alert`` rows, so the bytes match the reference script's output.
    Raises ``ValueError`` for an unknown format.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
    content = export_document(
        report.document, fmt, alerts=list(report.alert_documents or []), comparison=report.comparison
    )
    content_type, suffix = EXPORT_FORMATS[fmt]
    return content, content_type, f"run-{report.run_id}-{suffix}"
