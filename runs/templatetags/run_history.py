"""The run history's table rows, written in Python (``{% history_rows runs %}``).

The history page prints 25 rows of a dozen cells; through the template language each cell is a
variable lookup, an autoescape and a ``localize`` call, which made the rows most of the page's
time (tests/bench_ratios.py compares the page with a JSON view of the same runs). Here one row
is one f-string over values worked out in :func:`runs.queries.history_rows`, every
interpolated value escaped. The markup is the one ``templates/pages/runs.html`` had inline
(tests/test_pages_runs.py reads it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from html import escape

from django import template
from django.utils.safestring import SafeString, mark_safe

from runs.queries import HistoryRow

register = template.Library()

_SCRIPTED = ' · <span class="tag tag-warn scripted">scripted (not measured)</span>'
_CHAOS = ' · <span class="tag tag-warn chaos">chaos (pipeline faults, not measured)</span>'
_STOPPED = '<span class="tag tag-warn">stopped at the cost ceiling</span>'
_UNPRICED = '<span class="tag">some costs unknown</span>'
_ERROR = '<span class="tag tag-bad">error</span>'
#: ``escape`` remembered for the values rows repeat (triggers, statuses, amounts).
_escaped = functools.lru_cache(maxsize=1024)(escape)


@register.simple_tag
def history_rows(runs: Iterable[HistoryRow]) -> SafeString:
    """The ``<tr>`` rows of the history table, one per run of ``runs``."""
    return mark_safe("\n    ".join(_row(run) for run in runs))  # each row escapes every value it prints


def _row(run: HistoryRow) -> str:
    """One ``<tr>`` of the history table for ``run``."""
    # What kind of run it is, as templates/pages/_run_kind.html says it on the other lists.
    # A refresh's and a re-run's tag links to the run it refreshes or repeats.
    if run.lane == "replay":
        if run.refresh_of_url is None:
            lane = ' · <span class="tag tag-warn refresh">refresh</span>'
        else:
            lane = (
                f' · <a class="tag tag-warn refresh" href="{escape(run.refresh_of_url)}">refresh of run {int(run.refresh_of_id or 0)}</a>'
            )
        if run.refresh_of_lane == "scripted":
            lane += _SCRIPTED
    elif run.lane == "scripted":
        lane = _SCRIPTED
    elif run.lane == "chaos":
        lane = _CHAOS
    else:
        lane = ""
    if run.repeat_of_id is not None:
        lane += f' · <a class="tag rerun" href="{escape(run.repeat_of_url or "")}">re-run of run {int(run.repeat_of_id)}</a>'
    notes = []
    if run.environment_missing_count:
        notes.append(f'<span class="tag tag-warn">{run.environment_missing_count:d} skipped: required environment missing</span>')
    if run.cancelled_count:
        notes.append(f'<span class="tag">{run.cancelled_count:d} skipped: run cancelled</span>')
    if run.stopped_at_ceiling:
        notes.append(_STOPPED)
    if run.has_unpriced:
        notes.append(_UNPRICED)
    if run.has_error:
        notes.append(_ERROR)
    # Every value below is escaped or a whole number. One f-string: str.format with sixteen
    # keywords cost as much again as the rest of the row.
    return (
        "<tr>\n"
        f'      <td class="nowrap"><a href="{escape(run.url)}">run {int(run.pk)}</a></td>\n'
        f'      <td class="nowrap">{escape(run.night)}</td>\n'
        f'      <td class="num">{int(run.rotation_day)}</td>\n'
        f"      <td>{_escaped(run.trigger_label)}{lane}</td>\n"
        f'      <td><span class="status status-{_escaped(run.status)}">{_escaped(run.status_label)}</span></td>\n'
        f'      <td class="num">{int(run.execution_count)}</td>\n'
        f'      <td class="num">{int(run.completed_count)}</td>\n'
        f'      <td class="num">{int(run.candidate_failure_count)}</td>\n'
        f'      <td class="num">{int(run.infrastructure_failure_count)}</td>\n'
        f'      <td class="num">{int(run.skipped_count)}</td>\n'
        f'      <td class="num">{_escaped(run.spent)}<div class="muted small">of {_escaped(run.ceiling)}</div></td>\n'
        f'      <td class="notes">{" ".join(notes)}</td>\n'
        "    </tr>"
    )
