"""Server-rendered line charts: inline SVG, no JavaScript and no external assets.

``{% line_chart points "pass_rate" title="Pass rate" kind="rate" %}`` plots one attribute of a
list of points (oldest first) that each have a ``label``; a point whose value is None leaves a
gap. The SVG carries a title and description for screen readers, every point a tooltip, and
both axes are labelled.

Each line chart is drawn twice, at a wide and at a narrow layout: both scale to their box
(viewBox, width 100%), and the stylesheet shows the one whose text reads at 11 px or more in
the box it has (the narrow one below 520 px, a phone's width).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django import template

from evalhub.templatetags.evalhub_format import duration, format_usd, score3

register = template.Library()

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 44


@dataclass(frozen=True)
class Layout:
    """A line chart's drawing box in SVG units: its size, its margins, and whether the x axis
    labels its middle run too (a narrow chart has room for the first and last only)."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = RIGHT
    top: int = TOP
    bottom: int = BOTTOM
    middle_tick: bool = True


WIDE = Layout()
#: Drawn 330 units wide, it shows 12 px text at about 12 px on a 390 px phone (a 337 px box).
NARROW = Layout(width=330, height=240, left=56, right=12, middle_tick=False)


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def _seconds(milliseconds: float) -> str:
    """A latency tick in seconds: ``0``, ``15 s``, ``2.5 s``; below a second in ms (``500 ms``,
    ``0.5 ms``), which stays short where ``0.0005 s`` would not (ms in, so values stay in ms)."""
    if milliseconds == 0:
        return "0"
    if milliseconds < 1000:
        return f"{milliseconds:g} ms"
    seconds = milliseconds / 1000
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:g} s"


def _tick_usd(value: float) -> str:
    return "$0" if value == 0 else format_usd(value)


FORMATS: dict[str, Callable[[Any], str]] = {
    "rate": _percent,
    "score": score3,
    "ms": duration,
    "seconds": duration,
    "usd": format_usd,
    "tick-usd": _tick_usd,
    "tick-seconds": _seconds,
    "number": lambda value: f"{value:g}",
}
#: How tick labels are written (tooltips keep the exact value's format).
TICK_FORMATS = {"usd": "tick-usd", "ms": "tick-seconds", "seconds": "tick-seconds"}
#: Rates and scores live in [0, 1]; latency and cost scale to their largest value.
FIXED_MAX = {"rate": 1.0, "score": 1.0}
#: The axis of a chart with nothing to plot: a minute of latency, a dollar.
EMPTY_MAX = {"seconds": 60_000.0, "ms": 60_000.0, "usd": 1.0}


@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    text: str  # the tooltip: "run 12 · 2026-11-30: 83%"


@dataclass(frozen=True)
class Tick:
    position: float
    text: str
    anchor: str = "middle"  # SVG text-anchor: the first and last x labels stay inside the chart


#: The y axis's rotated title takes x 3..17 (drawn at x=14, 12 px text: its ascent left of 14,
#: its descent right of it); a tick label ends 6 units left of the axis.
AXIS_TITLE_ROOM, TICK_GAP = 20, 6
#: A 12 px tick character's width in SVG units, at most: digits are 7.6 in DejaVu Sans (Debian's
#: default sans-serif), and a few glyphs are wider (``%`` 11.4: ``100%`` ran into the pass-rate
#: chart's title at the phone layout's 56).
TICK_CHAR_WIDTH, WIDE_TICK_CHARS = 8, {"%": 12, "m": 12, "M": 12, "W": 12}


def tick_text_width(text: str) -> int:
    """An upper bound of ``text``'s width as a 12 px tick label, in SVG units."""
    return sum(WIDE_TICK_CHARS.get(char, TICK_CHAR_WIDTH) for char in text)


def y_axis_left(left: int, tick_texts: Sequence[str]) -> int:
    """Where the y axis is drawn (SVG units): ``left``, or further right when the widest tick
    label would otherwise run into the axis's rotated title (``0.0005 s`` did at 64)."""
    widest = max((tick_text_width(text) for text in tick_texts), default=0)
    return max(left, AXIS_TITLE_ROOM + TICK_GAP + widest)


def nice_axis(largest: float) -> tuple[float, list[float]]:
    """The top of an axis starting at 0 that holds ``largest``, and its tick values: steps of
    1, 2 or 5 × 10^k, three to five ticks, so no two ticks print the same label."""
    if largest <= 0:
        return 1.0, [0.0, 0.5, 1.0]
    magnitude = 10 ** math.floor(math.log10(largest))
    for step in (magnitude / 5, magnitude / 2, magnitude, magnitude * 2, magnitude * 5, magnitude * 10):
        count = math.ceil(largest / step - 1e-9)
        if count <= 4:
            break
    count = max(count, 2)
    return round(step * count, 12), [round(step * index, 12) for index in range(count + 1)]


def line_chart_geometry(labels: Sequence[str], values: Sequence[float | None], *, kind: str, layout: Layout = WIDE) -> dict[str, Any]:
    """Positions in ``layout``'s SVG units for the chart template: points, line segments (split
    at gaps) and ticks.

    ``kind`` says how values read: ``rate`` and ``score`` in [0, 1], ``seconds`` (values in ms,
    ticks in s), ``usd``, ``number``. None is a gap: nothing was measured there."""
    fmt = FORMATS.get(kind, FORMATS["number"])
    tick_fmt = FORMATS[TICK_FORMATS.get(kind, kind if kind in FORMATS else "number")]
    present = [value for value in values if value is not None]
    if kind in FIXED_MAX:
        top, tick_values = FIXED_MAX[kind], [0.0, 0.5, 1.0]
    else:
        top, tick_values = nice_axis(max(present) if present else EMPTY_MAX.get(kind, 0.0))
    y_tick_texts = [tick_fmt(value) for value in tick_values]
    left, top_margin = y_axis_left(layout.left, y_tick_texts), layout.top
    plot_w = layout.width - left - layout.right
    plot_h = layout.height - layout.top - layout.bottom
    count = len(values)

    def x_of(index: int) -> float:
        return round(left + (plot_w / 2 if count == 1 else index * plot_w / (count - 1)), 1)

    def y_of(value: float) -> float:
        return round(top_margin + plot_h - (value / top) * plot_h, 1)

    points, segments, current = [], [], []
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        if value is None:
            if current:
                segments.append(current)
            current = []
            continue
        point = ChartPoint(x_of(index), y_of(value), f"{label}: {fmt(value)}")
        points.append(point)
        current.append(point)
    if current:
        segments.append(current)
    y_ticks = [Tick(y_of(value), text) for value, text in zip(tick_values, y_tick_texts, strict=True)]
    picks = sorted({0, count // 2, count - 1} if layout.middle_tick else {0, count - 1}) if count else []
    x_ticks = [
        Tick(x_of(index), labels[index], "middle" if count == 1 else "start" if index == 0 else "end" if index == count - 1 else "middle")
        for index in picks
    ]
    return {
        "width": layout.width,
        "height": layout.height,
        "left": left,
        "right": layout.width - layout.right,
        "top": top_margin,
        "bottom": layout.height - layout.bottom,
        "points": points,
        "lines": [" ".join(f"{p.x},{p.y}" for p in segment) for segment in segments if len(segment) > 1],
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "empty": not points,
        "middle_x": round(left + plot_w / 2, 1),
        "middle_y": round(top_margin + plot_h / 2, 1),
    }


@register.inclusion_tag("charts/line.html")
def line_chart(
    points: Sequence[Any], attribute: str, *, title: str, y_label: str, kind: str = "number", chart_id: str = "chart"
) -> dict[str, Any]:
    labels = [str(point.label) for point in points]
    values = [getattr(point, attribute) for point in points]
    return {
        "layouts": [
            ("wide", line_chart_geometry(labels, values, kind=kind)),
            ("narrow", line_chart_geometry(labels, values, kind=kind, layout=NARROW)),
        ],
        "title": title,
        "y_label": y_label,
        "chart_id": chart_id,
        "x_label": "runs, oldest to newest",
        "description": f"{title} for {len(points)} run{'s' if len(points) != 1 else ''}, oldest first.",
    }


SCATTER_WIDTH, SCATTER_HEIGHT = 640, 320
SCATTER_LEFT, SCATTER_RIGHT, SCATTER_TOP, SCATTER_BOTTOM = 64, 24, 16, 48


@dataclass(frozen=True)
class ScatterPoint:
    x: float
    y: float
    label: str
    text: str  # the tooltip
    best: bool
    label_x: float
    anchor: str


def scatter_geometry(points: Sequence[tuple[str, float, float, bool]]) -> dict[str, Any]:
    """Pass rate (y, in [0, 1]) against cost per passed execution (x, USD from 0): pixel positions
    of ``(label, cost, rate, best)`` points, ticks, and each label placed beside its point."""
    top_x, x_values = nice_axis(max((cost for _label, cost, _rate, _best in points), default=0.0))
    plot_w = SCATTER_WIDTH - SCATTER_LEFT - SCATTER_RIGHT
    plot_h = SCATTER_HEIGHT - SCATTER_TOP - SCATTER_BOTTOM

    def x_of(value: float) -> float:
        return round(SCATTER_LEFT + value / top_x * plot_w, 1)

    def y_of(value: float) -> float:
        return round(SCATTER_TOP + plot_h - value * plot_h, 1)

    placed = []
    for label, cost, rate, best in points:
        x, y = x_of(cost), y_of(rate)
        right_side = x < SCATTER_LEFT + plot_w * 0.6
        placed.append(
            ScatterPoint(
                x,
                y,
                label,
                f"{label}: {_percent(rate)} pass rate, {format_usd(cost)} per pass",
                best,
                x + 8 if right_side else x - 8,
                "start" if right_side else "end",
            )
        )
    return {
        "width": SCATTER_WIDTH,
        "height": SCATTER_HEIGHT,
        "left": SCATTER_LEFT,
        "right": SCATTER_WIDTH - SCATTER_RIGHT,
        "top": SCATTER_TOP,
        "bottom": SCATTER_HEIGHT - SCATTER_BOTTOM,
        "points": placed,
        "y_ticks": [Tick(y_of(value), _percent(value)) for value in (0.0, 0.25, 0.5, 0.75, 1.0)],
        "x_ticks": [Tick(x_of(value), _tick_usd(value)) for value in x_values],
        "empty": not placed,
    }


@register.inclusion_tag("charts/scatter.html")
def value_chart(rows: Sequence[Any], *, chart_id: str = "chart-value") -> dict[str, Any]:
    """``{% value_chart leaderboard.rows %}``: each row with a known ``cost_per_pass`` and a
    ``pass_rate`` plotted as pass rate against cost per pass; the ``best_value`` row stands out."""
    plotted = [
        (row.candidate_key, float(row.cost_per_pass), row.pass_rate, row.best_value)
        for row in rows
        if row.cost_per_pass is not None and row.pass_rate is not None
    ]
    left_out = [row.candidate_key for row in rows if row.cost_per_pass is None or row.pass_rate is None]
    return {
        **scatter_geometry(plotted),
        "chart_id": chart_id,
        "title": "Pass rate against cost per passed execution",
        "description": f"{len(plotted)} candidates; up and to the left is better value.",
        "left_out": left_out,
    }
