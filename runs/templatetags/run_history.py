"""The run history's table rows, written in Python (``{% history_rows runs %}``).

The history page prints 25 rows of a dozen cells; through the template language each cell is a
variable lookup, an autoescape and a ``localize`` call, which made the rows most of the page's
time (tests/bench_ratios.py compares the page with a JSON view of the same runs). Here one row
is one string format over values worked out in :func:`runs.queries.history_rows`, every
interpolated value escaped. The markup is the one ``templates/pages/runs.html`` had inline
(tests/test_pages_runs.py reads it).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from django import template
from django.utils.safestring import SafeString, mark_safe

from runs.queries import HistoryRow

register = template.Library()

_ROW = (
    "<tr>\n"
    '      <td class="nowrap"><a href="{url}">run {pk}</a></td>\n'
    '      <td class="nowrap">{night}</td>\n'
    '      <td class="num">{rotation_day}</td>\n'
    "      <td>{trigger}{lane}</td>\n"
    '      <td><span class="status status-{status}">{status_label}</span></td>\n'
    '      <td class="num">{execution_count}</td>\n'
    '      <td class="num">{completed_count}</td>\n'
    '      <td class="num">{candidate_failure_count}</td>\n'
    '      <td class="num">{infrastructure_failure_count}</td>\n'
    '      <td class="num">{skipped_count}</td>\n'
    '      <td class="num">{spent}<div class="muted small">of {ceiling}</div></td>\n'
    '      <td class="notes">{notes}</td>\n'
    "    </tr>"
)
_SCRIPTED = ' · <span class="tag tag-warn scripted">scripted</span>'
_STOPPED = '<span class="tag tag-warn">stopped at the cost ceiling</span>'
_UNPRICED = '<span class="tag">some costs unknown</span>'
_ERROR = '<span class="tag tag-bad">error</span>'


@register.simple_tag
def history_rows(runs: Iterable[HistoryRow]) -> SafeString:
    """The ``<tr>`` rows of the history table, one per run of ``runs``."""
    return mark_safe("\n    ".join(_row(run) for run in runs))  # each row escapes every value it prints


def _row(run: HistoryRow) -> str:
    """One ``<tr>`` of the history table for ``run``."""
    if run.lane == "replay":
        lane = f" · refresh of run {escape(str(run.refresh_of_id))}"
    elif run.lane == "scripted":
        lane = _SCRIPTED
    else:
        lane = ""
    notes = []
    if run.environment_missing_count:
        notes.append(f'<span class="tag tag-warn">{run.environment_missing_count:d} skipped: required environment missing</span>')
    if run.stopped_at_ceiling:
        notes.append(_STOPPED)
    if run.has_unpriced:
        notes.append(_UNPRICED)
    if run.has_error:
        notes.append(_ERROR)
    # Every value below is escaped or a whole number.
    return _ROW.format(
        url=escape(run.url),
        pk=int(run.pk),
        night=escape(run.night),
        rotation_day=int(run.rotation_day),
        trigger=escape(run.trigger_label),
        lane=lane,
        status=escape(run.status),
        status_label=escape(run.status_label),
        execution_count=int(run.execution_count),
        completed_count=int(run.completed_count),
        candidate_failure_count=int(run.candidate_failure_count),
        infrastructure_failure_count=int(run.infrastructure_failure_count),
        skipped_count=int(run.skipped_count),
        spent=escape(run.spent),
        ceiling=escape(run.ceiling),
        notes=" ".join(notes),
    )
