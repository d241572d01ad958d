"""Server-rendered line charts: inline SVG, no JavaScript and no external assets.

``{% line_chart points "pass_rate" title="Pass rate" kind="rate" %}`` plots one attribute of a
list of points (oldest first) that each have a ``label``; a point whose value is None leaves a
gap. The SVG carries a title and description for screen readers, every point a tooltip, and
both axes are labelled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django import template

from evalhub.templatetags.evalhub_format import duration, format_usd, score3

register = template.Library()

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 44


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


FORMATS: dict[str, Callable[[Any], str]] = {
    "rate": _percent,
    "score": score3,
    "ms": duration,
    "usd": format_usd,
    "number": lambda value: f"{value:g}",
}
#: Rates and scores live in [0, 1]; latency and cost scale to their largest value.
FIXED_MAX = {"rate": 1.0, "score": 1.0}


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


def line_chart_geometry(labels: Sequence[str], values: Sequence[float | None], *, kind: str) -> dict[str, Any]:
    """Pixel positions for the chart template: points, line segments (split at gaps) and ticks."""
    fmt = FORMATS.get(kind, FORMATS["number"])
    present = [value for value in values if value is not None]
    top = FIXED_MAX.get(kind) or (max(present) * 1.1 if present and max(present) > 0 else 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = len(values)

    def x_of(index: int) -> float:
        return round(LEFT + (plot_w / 2 if count == 1 else index * plot_w / (count - 1)), 1)

    def y_of(value: float) -> float:
        return round(TOP + plot_h - (value / top) * plot_h, 1)

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
    y_ticks = [Tick(y_of(top * share), fmt(top * share)) for share in (0, 0.5, 1)]
    picks = sorted({0, count // 2, count - 1}) if count else []
    x_ticks = [
        Tick(x_of(index), labels[index], "middle" if count == 1 else "start" if index == 0 else "end" if index == count - 1 else "middle")
        for index in picks
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "points": points,
        "lines": [" ".join(f"{p.x},{p.y}" for p in segment) for segment in segments if len(segment) > 1],
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "empty": not points,
        "middle_x": round(LEFT + plot_w / 2, 1),
        "middle_y": round(TOP + plot_h / 2, 1),
    }


@register.inclusion_tag("charts/line.html")
def line_chart(points: Sequence[Any], attribute: str, *, title: str, y_label: str, kind: str = "number", chart_id: str = "chart") -> dict[str, Any]:
    labels = [str(point.label) for point in points]
    values = [getattr(point, attribute) for point in points]
    return {
        **line_chart_geometry(labels, values, kind=kind),
        "title": title,
        "y_label": y_label,
        "chart_id": chart_id,
        "x_label": "runs, oldest to newest",
        "description": f"{title} for {len(points)} run{'s' if len(points) != 1 else ''}, oldest first.",
    }
