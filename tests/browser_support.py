"""What the browser suite checks on every page, as a person would see it in Chromium.

``look_at(page, url, name)`` opens a page at the desktop width (1366 × 900) and at a phone width
(390 × 844) and returns what it found: console errors (including failed requests such as a missing
favicon), elements whose text overflows their box (or is clipped by it), tables cut off at the
desktop width, links that cannot be clicked because something covers them, chart text that is too
small (at either width) or tick labels that repeat, and a screenshot at each width under
``var/screenshots/``.
``broken_links(page, urls)`` fetches every same-site link with the page's sign-in and returns those
that answer an error.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

#: Debian's Chromium (``.ci/run`` installs the ``chromium`` package); never a browser download.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
SCREENSHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"
#: The smallest chart text a person reads without zooming, in CSS pixels as rendered.
MIN_CHART_TEXT_PX = 11

# Every element with text whose content is wider than its box: its text spills out or is clipped.
# Scroll containers are reported separately (``scrolled``): at the desktop width nothing should
# need a sideways scroll, at a phone width wide tables may scroll inside their container.
_LAYOUT_JS = """
() => {
  const describe = (el) => {
    const cls = el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '';
    return el.tagName.toLowerCase() + cls + ' "' + (el.innerText || el.value || '').trim().slice(0, 60).replace(/\\s+/g, ' ') + '"';
  };
  const overflowing = [], scrolled = [], covered = [], charts = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg')) continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || style.display === 'inline' || style.display === 'contents') continue;
    const rect = el.getBoundingClientRect();
    if (rect.width <= 1 || rect.height <= 1) continue;  // visually hidden (screen-reader text)
    if (!(el.innerText || '').trim() && !['INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName)) continue;
    if (el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') continue;
    // A form field narrower than its value on a phone scrolls inside itself; at the desktop width it is clipped text.
    if (el.tagName === 'INPUT' && window.innerWidth < 700) continue;
    const wider = el.scrollWidth > el.clientWidth + 1;
    if (!wider) continue;
    // Django admin's home page floats its sidebar into the column's right margin by design.
    if (el.classList.contains('colMS')) continue;
    // Name what sticks out: the deepest descendant whose right edge passes this box's.
    let culprit = '';
    for (const child of el.querySelectorAll('*')) {
      const box = child.getBoundingClientRect();
      if (box.width > 1 && box.right > rect.left + el.clientWidth + 1 && !child.closest('svg')) culprit = ' (sticking out: ' + describe(child) + ')';
    }
    const line = describe(el) + ' ' + el.scrollWidth + ' > ' + el.clientWidth + culprit;
    if (style.overflowX === 'auto' || style.overflowX === 'scroll') scrolled.push(line);
    else overflowing.push(line);
  }
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) overflowing.push('the page itself ' + page.scrollWidth + ' > ' + page.clientWidth);
  for (const link of document.querySelectorAll('a[href], button')) {
    const style = getComputedStyle(link);
    if (style.display === 'none' || style.visibility === 'hidden' || link.closest('details:not([open])')) continue;
    const box = link.getBoundingClientRect();
    if (box.width <= 1 || box.height <= 1 || box.right < 0 || box.bottom < 0) continue;  // hidden until focused
    link.scrollIntoView({block: 'center', inline: 'center'});
    const now = link.getClientRects()[0];  // a link that wraps: its first line
    const hit = document.elementFromPoint(now.left + Math.min(now.width / 2, 8), now.top + now.height / 2);
    if (!hit || !(hit === link || link.contains(hit) || hit.contains(link) && hit.tagName === 'LABEL')) {
      covered.push(describe(link) + ' under ' + (hit ? describe(hit) : 'nothing'));
    }
  }
  window.scrollTo(0, 0);
  for (const svg of document.querySelectorAll('figure.chart svg')) {
    const box = svg.getBoundingClientRect();
    if (box.width <= 1) continue;  // the layout the stylesheet hides at this width
    const figure = svg.closest('figure');
    const padding = parseFloat(getComputedStyle(figure).paddingLeft) + parseFloat(getComputedStyle(figure).paddingRight);
    const ticks = [...svg.querySelectorAll('text')].map((text) => ({
      text: text.textContent.trim(), cls: text.getAttribute('class'), px: text.getBoundingClientRect().height,
      size: parseFloat(getComputedStyle(text).fontSize) * (svg.getScreenCTM() ? svg.getScreenCTM().a : 1),
      left: text.getBoundingClientRect().left - box.left, right: box.right - text.getBoundingClientRect().right,
      box: (({left, top, right, bottom}) => [left, top, right, bottom])(text.getBoundingClientRect()),
    }));
    charts.push({id: figure.id, cls: svg.getAttribute('class'), width: box.width, room: figure.clientWidth - padding, texts: ticks});
  }
  return {overflowing, scrolled, covered, charts};
}
"""


@dataclass
class Look:
    """What one page showed at both widths (a list of problems each; empty is good)."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    overflowing: dict[str, list[str]] = field(default_factory=dict)
    scrolled_at_desktop: list[str] = field(default_factory=list)
    covered: dict[str, list[str]] = field(default_factory=dict)
    charts: list[dict[str, Any]] = field(default_factory=list)
    #: The charts as drawn at the phone width (each chart's visible layout, as ``charts``).
    phone_charts: list[dict[str, Any]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)
    status: int = 0
    seconds: float = 0.0

    def chart_problems(self) -> list[str]:
        problems = []
        for width, chart in [("1366", chart) for chart in self.charts] + [("phone", chart) for chart in self.phone_charts]:
            for text in chart["texts"]:
                if text["size"] < MIN_CHART_TEXT_PX - 0.01:
                    problems.append(f"{chart['id']} at {width}: {text['text']!r} is {text['size']:.1f} px")
        for chart in self.charts + self.phone_charts:
            y_ticks = y_tick_labels(chart)
            if not y_ticks:
                problems.append(f"{chart['id']}: no y-axis tick labels")
            if len(set(y_ticks)) != len(y_ticks):
                problems.append(f"{chart['id']}: repeated tick labels {y_ticks}")
            problems += [f"{chart['id']}: {first!r} is drawn over {second!r}" for first, second in overlapping_axis_texts(chart)]
        return problems

    def problems(self) -> list[str]:
        """Every problem found, one line each (console, overflow, desktop scrolling, covered links, charts)."""
        lines = [f"console: {error}" for error in self.console_errors]
        for width, items in self.overflowing.items():
            lines += [f"overflows at {width}: {item}" for item in items]
        lines += [f"needs a sideways scroll at 1366 px: {item}" for item in self.scrolled_at_desktop]
        for width, items in self.covered.items():
            lines += [f"covered at {width}: {item}" for item in items]
        lines += [f"chart: {item}" for item in self.chart_problems()]
        if self.status >= 400:
            lines.append(f"status {self.status}")
        return lines


def charts_on(page: Any) -> list[dict[str, Any]]:
    """The charts drawn on the page at its current width, as :class:`Look` keeps them."""
    return page.evaluate(_LAYOUT_JS)["charts"]


def overlapping_axis_texts(chart: dict[str, Any]) -> list[tuple[str, str]]:
    """The pairs of a chart's tick labels and axis titles whose drawn boxes intersect (a label
    placed beside its point, in a scatter chart, is not one of them)."""
    texts = [text for text in chart["texts"] if {"tick", "axis-label"} & set((text["cls"] or "").split())]
    return [
        (first["text"], second["text"])
        for index, first in enumerate(texts)
        for second in texts[index + 1 :]
        if first["box"][0] < second["box"][2]
        and second["box"][0] < first["box"][2]
        and first["box"][1] < second["box"][3]
        and second["box"][1] < first["box"][3]
    ]


def y_tick_labels(chart: dict[str, Any]) -> list[str]:
    """A chart's y-axis tick labels, bottom to top."""
    return [text["text"] for text in chart["texts"] if "y-tick" in (text["cls"] or "").split()]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def look_at(page: Any, url: str, name: str, *, folder: str = "pages") -> Look:
    """Open ``url`` at both widths and return what a person would see wrong (see the module docstring)."""
    started = time.monotonic()
    look = Look(url)
    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            location = message.location.get("url", "") if isinstance(message.location, dict) else ""
            errors.append(f"{message.text} {location}".strip())

    def on_page_error(error: Any) -> None:
        errors.append(f"uncaught: {error}")

    def on_response(response: Any) -> None:
        if response.status >= 400 and response.url != url:
            errors.append(f"{response.status} for {response.url}")

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    page.on("response", on_response)
    try:
        folder_path = SCREENSHOTS / folder
        folder_path.mkdir(parents=True, exist_ok=True)
        for label, size in (("1366", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(size)
            response = page.goto(url, wait_until="load")
            look.status = max(look.status, response.status if response else 0)
            found = page.evaluate(_LAYOUT_JS)
            look.overflowing[label] = found["overflowing"]
            look.covered[label] = found["covered"]
            if label == "1366":
                look.scrolled_at_desktop = found["scrolled"]
                look.charts = found["charts"]
                look.links = page.eval_on_selector_all("a[href]", "links => links.map((a) => a.href)")
            else:
                look.phone_charts = found["charts"]
            shot = folder_path / f"{_slug(name)}-{label}.png"
            page.screenshot(path=str(shot), full_page=True)
            look.screenshots.append(shot)
    finally:
        page.remove_listener("console", on_console)
        page.remove_listener("pageerror", on_page_error)
        page.remove_listener("response", on_response)
    look.console_errors = list(dict.fromkeys(errors))
    look.seconds = time.monotonic() - started
    return look


# One request at a time: the live server shares one database connection between its threads
# (an in-memory SQLite database), so parallel requests would queue on it or trip over it.
_FETCH_JS = """
async (urls) => {
  const statuses = [];
  for (const url of urls) {
    try {
      const response = await fetch(url, {credentials: 'same-origin', redirect: 'follow'});
      statuses.push(response.status);
    } catch (error) {
      statuses.push(0);
    }
  }
  return statuses;
}
"""


def broken_links(page: Any, base_url: str, urls: list[str], checked: dict[str, int]) -> list[str]:
    """The same-site links among ``urls`` that answer 400 or more (GET from the page, with its
    sign-in), and every link that leaves the site. ``checked`` caches statuses
    across the pages of one test."""
    broken = []
    origin = urlsplit(base_url)
    wanted = []
    for raw in urls:
        url = urljoin(base_url, raw).split("#", 1)[0]
        parts = urlsplit(url)
        if parts.scheme in ("mailto", "javascript"):
            continue
        if (parts.scheme, parts.netloc) != (origin.scheme, origin.netloc):
            broken.append(f"{url}: leaves the site")
        elif url not in checked and url not in wanted:
            wanted.append(url)
    if wanted:
        checked.update(zip(wanted, page.evaluate(_FETCH_JS, wanted), strict=True))
    for raw in urls:
        url = urljoin(base_url, raw).split("#", 1)[0]
        if url in checked and checked[url] >= 400 or checked.get(url) == 0:
            broken.append(f"{url}: {checked[url] or 'no answer'}")
    return list(dict.fromkeys(broken))


def sign_in(page: Any, base_url: str, username: str, password: str) -> None:
    """Sign in through the sign-in form, as a person does."""
    page.set_viewport_size(DESKTOP)
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"^(?!.*accounts/login).*$"))
