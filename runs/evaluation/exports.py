"""Exports of a stored report in the formats CI tools already read (the reference's report files, written by its nightly script).

``export_document`` renders a report document; ``runs.reporting.export_report`` feeds it a stored
``Report`` row's ``document``, ``comparison`` and ``alert_documents`` (stored as text in their
original key order, see ``evalhub.fields.DocumentField``), so an export is the same bytes today
and in a year, whatever happened to the history since, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from runs.evaluation.renderers import (
    render_github_summary,
    render_json,
    render_junit,
    render_markdown,
    render_previous_bundle_section,
)

#: format -> (content type, file name suffix)
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "json": ("application/json; charset=utf-8", "live-report.json"),
    "markdown": ("text/markdown; charset=utf-8", "live-report.md"),
    "junit": ("application/xml; charset=utf-8", "live-report.junit.xml"),
    "github": ("text/markdown; charset=utf-8", "github-live-summary.md"),
}


def export_file_name(fmt: str, *, lane: str = "live") -> str:
    """The reference's file name for ``fmt`` (``live-report.json`` ...), with ``live`` replaced by
    the lane of a run that is not a measurement (``scripted-report.json``,
    ``github-replay-summary.md``). Raises ``KeyError`` for an unknown format."""
    suffix = EXPORT_FORMATS[fmt][1]
    return suffix if lane == "live" else suffix.replace("live", lane)


def export_document(
    document: dict[str, Any],
    fmt: str,
    *,
    alerts: list[dict[str, Any]] | None = None,
    comparison: dict[str, Any] | None = None,
) -> str:
    """The text of ``document`` (a report document) in ``fmt``, as the nightly script writes it.

    ``json``: ``render_json({"report", "alerts", "comparison"})`` (``live-report.json``);
    ``markdown`` and ``junit``: the report's renderings (JUnit naming each repetition of a case); ``github``: the CI summary with
    ``alerts`` plus the "Previous compatible bundle" section for ``comparison``.
    Raises ``ValueError`` for an unknown format.
    """
    alerts = list(alerts or [])
    if fmt == "json":
        return render_json({"report": document, "alerts": alerts, "comparison": comparison})
    if fmt == "markdown":
        return render_markdown(document)
    if fmt == "junit":
        return render_junit(document, distinct_names=True)
    if fmt == "github":
        return render_github_summary(document, alerts) + render_previous_bundle_section(comparison)
    raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
