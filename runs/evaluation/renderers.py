"""Exports of a report: the reference JSON, Markdown, JUnit XML and the CI (GitHub) summary.

Pure functions from the report document (see :func:`runs.evaluation.reports.build_report`) to text,
byte-identical to the reference's ``renderRunnerWorkflowMarkdown``, ``renderRunnerWorkflowJUnit``
and ``renderRunnerWorkflowGitHubSummary`` (``workflow-report.ts``) and to the nightly script's
``JSON.stringify(..., null, 2)`` files (the JUnit XML replaces the characters XML cannot hold, which
the reference writes raw: see :func:`_xml`). Values interpolated into text print as a JavaScript
template literal prints them: numbers via :func:`evalhub.jsnum.js_number`, booleans lowercase.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evalhub.jsnum import js_number, round_half_up
from runs.evaluation.reports import DIMENSION_KEYS, SCRIPTED_SOURCE

# JSON.stringify escapes lone surrogates (\udxxx); json.dumps(ensure_ascii=False) would leave
# them raw and the text could not be encoded as UTF-8.
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Keys that JavaScript objects order first, ascending: canonical array indices 0 .. 2**32 - 2.
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_MAX_ARRAY_INDEX = 2**32 - 2

NO_ALERTS_LINE = "No active workflow-eval regression alerts."
#: The line under the title of a scripted report (Markdown and the CI summary): a scripted
#: 7/7 PASS pasted anywhere still reads as scripted. Live reports keep the reference's bytes.
SCRIPTED_NOTICE = (
    "> **Scripted run — not a measurement.** The real runtime was driven against evalhub's scripted "
    "model (evalhub-scripted-model), not a real model: these results show the harness works end to end."
)
#: A scripted report's JUnit suite and class names (a live report keeps the reference's).
SCRIPTED_SUITE = "paperclip-runner-workflows-scripted"
SCRIPTED_CLASSNAME = "runner.workflow.scripted"
NO_PREVIOUS_BUNDLE_LINE = "No compatible prior bundle is available."


def _text(value: Any) -> str:
    """``${value}`` in a JavaScript template literal, for the JSON values a report holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    return str(value)


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown, as ``renderRunnerWorkflowMarkdown`` writes it.

    A title with the bundle id; bullets for source, execution counts, failure counts and
    coverage (plus stress findings when the coverage has them); "Dimension means" (value or
    "not scored"); the "Combined operation and workflow coverage" table (workflow ids or "—");
    the "Executions" table (gate true/false/—, overall score rounded half-up to 3 places or —,
    PASS / FAIL / not scored). Lines end in ``\\n`` and the text ends with a blank line. A
    scripted report (source ``scripted``) has :data:`SCRIPTED_NOTICE` under the title.
    Raises ``KeyError`` for a report lacking the fields read.
    """
    aggregate = report["aggregate"]
    coverage = report["coverage"]
    stress = ""
    if "stressFindings" in coverage:
        stress = f" · {_text(coverage['stressFindings'])} stress findings"
    notice = [SCRIPTED_NOTICE, ""] if report["source"] == SCRIPTED_SOURCE else []
    lines = [
        f"# Runner workflow evals — {_text(report['bundle']['id'])}",
        "",
        *notice,
        f"- Source: {_text(report['source'])}",
        (
            f"- Executions: {_text(aggregate['executions'])}"
            f" · scoreable {_text(aggregate['scoreable'])}"
            f" · passed {_text(aggregate['passed'])}"
        ),
        (
            f"- Candidate failures: {_text(aggregate['candidateFailures'])}"
            f" · infrastructure failures {_text(aggregate['infrastructureFailures'])}"
            f" · skipped {_text(aggregate['skipped'])}"
        ),
        (
            f"- Coverage: {_text(coverage['canonicalOperations'])} operations"
            f" · {_text(coverage['capabilityCases'])} capability cases"
            f" · {_text(coverage['workflows'])} workflows{stress}"
        ),
        "",
        "## Dimension means",
        "",
    ]
    for dimension in DIMENSION_KEYS:
        mean = aggregate["dimensionMeans"].get(dimension)
        lines.append(f"- {dimension}: {'not scored' if mean is None else _text(mean)}")
    lines += [
        "",
        "## Combined operation and workflow coverage",
        "",
        "| operation | capability cases | composed workflows |",
        "| --- | --- | --- |",
    ]
    for operation in coverage["operations"]:
        workflows = ", ".join(operation["workflowIds"]) or "—"
        lines.append(f"| {_text(operation['operationId'])} | covered | {workflows} |")
    lines += [
        "",
        "## Executions",
        "",
        "| workflow | candidate | classification | gate | score | result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in report["results"]:
        overall = row["scorecard"]["overall"]
        if overall["passed"] is None:
            result = "not scored"
        else:
            result = "PASS" if overall["passed"] else "FAIL"
        gate = "—" if overall.get("gatePassed") is None else _text(overall["gatePassed"])
        score = "—" if overall["score"] is None else js_number(round_half_up(overall["score"]))
        lines.append(
            f"| {_text(row['scenarioId'])} | {_text(row['candidateId'])}"
            f" | {_text(row['observation']['classification'])} | {gate} | {score} | {result} |"
        )
    lines.append("")
    return "\n".join(lines) + "\n"


# Characters XML 1.0 cannot hold, escaped or not (its Char production): C0 controls but tab, newline
# and carriage return, lone surrogates, U+FFFE and U+FFFF.
_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(value: str) -> str:
    """The reference's attribute/text escaping: ``& < > "`` only (apostrophes stay), and every
    character XML cannot hold replaced by U+FFFD.

    A runtime's stderr (a colour escape, a NUL) reaches a failure message as it was printed; the
    reference would write it raw and the file would not parse as XML at all, so a CI could not
    read one test of it. Text without such characters is unchanged, byte for byte."""
    text = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return _NOT_XML_CHAR.sub("\ufffd", text)


def render_junit(report: Mapping[str, Any], *, distinct_names: bool = False) -> str:
    """The report as JUnit XML, as ``renderRunnerWorkflowJUnit`` writes it.

    One ``<testsuite name="paperclip-runner-workflows" tests failures skipped>`` (failures: rows
    whose overall passed is False; skipped: rows whose overall passed is None), one
    ``<testcase classname="runner.workflow" name="<case>/<candidate>">`` per row in order:
    unscored rows carry ``<skipped message>`` with the observation's failure message (or "not
    scoreable"), failed rows ``<failure message="workflow eval failed">`` with every dimension's
    reasons joined by "; ", passed rows are empty elements. Ends with a newline.
    With ``distinct_names`` (evalhub's export; the reference rendering is the default) a case
    that runs several times for a candidate names each run: ``<case>/<candidate> (repetition n)``,
    n counting its rows in order, so a CI's test list shows the three repetitions apart.
    Raises ``KeyError`` for a report lacking the fields read.
    """
    rows = report["results"]
    seen: dict[str, int] = {}
    totals: dict[str, int] = {}
    for row in rows:
        key = f"{_text(row['scenarioId'])}/{_text(row['candidateId'])}"
        totals[key] = totals.get(key, 0) + 1
    failures = sum(1 for row in rows if row["scorecard"]["overall"]["passed"] is False)
    skipped = sum(1 for row in rows if row["scorecard"]["overall"]["passed"] is None)
    scripted = report.get("source") == SCRIPTED_SOURCE
    suite, classname = (SCRIPTED_SUITE, SCRIPTED_CLASSNAME) if scripted else ("paperclip-runner-workflows", "runner.workflow")
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        (f'<testsuite name="{suite}" tests="{len(rows)}" failures="{failures}" skipped="{skipped}">'),
    ]
    if scripted:
        lines += [
            "  <properties>",
            '    <property name="lane" value="scripted" />',
            '    <property name="model" value="evalhub-scripted-model (not a measurement)" />',
            "  </properties>",
        ]
    for row in rows:
        plain = f"{_text(row['scenarioId'])}/{_text(row['candidateId'])}"
        seen[plain] = seen.get(plain, 0) + 1
        name = _xml(f"{plain} (repetition {seen[plain]})" if distinct_names and totals[plain] > 1 else plain)
        passed = row["scorecard"]["overall"]["passed"]
        if passed is None:
            failure = row["observation"].get("failure") or {}
            message = failure.get("message")
            message = "not scoreable" if message is None else message
            lines.append(f'  <testcase classname="{classname}" name="{name}"><skipped message="{_xml(message)}" /></testcase>')
        elif passed is False:
            reasons = "; ".join(reason for dimension in DIMENSION_KEYS for reason in row["scorecard"]["dimensions"][dimension]["reasons"])
            lines.append(
                f'  <testcase classname="{classname}" name="{name}">'
                f'<failure message="workflow eval failed">{_xml(reasons)}</failure></testcase>'
            )
        else:
            lines.append(f'  <testcase classname="{classname}" name="{name}" />')
    lines += ["</testsuite>", ""]
    return "\n".join(lines)


def render_github_summary(report: Mapping[str, Any], alerts: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The CI job summary, as ``renderRunnerWorkflowGitHubSummary`` writes it.

    The Markdown of :func:`render_markdown`, then "## Alerts" with one
    ``- SEVERITY code: message`` line per alert (``alerts`` as :func:`runs.evaluation.reports.compute_alerts`
    returns them), or "No active workflow-eval regression alerts." when there are none.
    """
    if alerts:
        alert_lines = [f"- {alert['severity'].upper()} {alert['code']}: {alert['message']}" for alert in alerts]
    else:
        alert_lines = [NO_ALERTS_LINE]
    return f"{render_markdown(report)}\n## Alerts\n\n" + "\n".join(alert_lines) + "\n"


def render_previous_bundle_section(comparison: Mapping[str, Any] | None) -> str:
    """The "## Previous compatible bundle" section the nightly script appends to the summary.

    ``comparison`` is the result of :func:`runs.evaluation.reports.compare_reports` against the newest
    compatible previous report, or None when there is none. The section starts with a blank
    line, so ``render_github_summary(...) + render_previous_bundle_section(...)`` is the
    script's ``github-live-summary.md``. An incompatible comparison has no deltas; they print
    as ``undefined``, as the script would print them.
    """
    if comparison is None:
        body = NO_PREVIOUS_BUNDLE_LINE
    else:
        pass_rate = comparison.get("passRateDelta")
        overall = comparison.get("overallDelta")
        body = (
            f"Pass-rate delta: {'undefined' if pass_rate is None else _text(pass_rate)}; "
            f"overall delta: {'undefined' if overall is None else _text(overall)}."
        )
    return f"\n## Previous compatible bundle\n\n{body}\n"


_INDENT = "  "


def _stringify(value: Any, depth: int) -> str:
    """``JSON.stringify(value, null, 2)`` of a value nested ``depth`` levels deep."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "null"
        return js_number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = _js_property_order([(str(key), item) for key, item in value.items()])
        parts = [f"{_string(key)}: {_stringify(item, depth + 1)}" for key, item in items]
        return _wrap("{", parts, "}", depth)
    if isinstance(value, (list, tuple)):
        return _wrap("[", [_stringify(item, depth + 1) for item in value], "]", depth)
    raise TypeError(f"cannot render {type(value).__name__} as JSON: {value!r}")


def _wrap(opening: str, parts: list[str], closing: str, depth: int) -> str:
    if not parts:
        return opening + closing
    inner = "\n" + _INDENT * (depth + 1)
    return opening + inner + ("," + inner).join(parts) + "\n" + _INDENT * depth + closing


def _string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) <= _MAX_ARRAY_INDEX


def _js_property_order(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """A JavaScript object's key order: array-index keys ascending, then the rest as inserted."""
    indices = [item for item in items if _is_array_index(item[0])]
    others = [item for item in items if not _is_array_index(item[0])]
    return sorted(indices, key=lambda item: int(item[0])) + others


def render_json(document: Any) -> str:
    """``JSON.stringify(document, null, 2) + "\\n"``: the reference's JSON files, byte for byte.

    Used for a report (the history file) and for the ``{report, alerts, comparison}`` export.
    Two-space indentation, ``"key": value``, non-ASCII text unescaped, numbers printed as
    JavaScript prints them (``1`` for ``1.0``, ``1e-7``), non-finite numbers as ``null``,
    empty containers as ``[]`` / ``{}``. Raises ``TypeError`` for a value JSON cannot hold.
    """
    return _stringify(document, 0) + "\n"
