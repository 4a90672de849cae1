"""Read a rendered report the way a browser's parser would, for assertions in tests.

String searches alone cannot tell our markup from injected markup; a parser can:
it counts the real elements and gives the visible text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser

# Elements a browser lays out as separate boxes: their text never runs into the neighbour's.
BLOCKS = {
    "address",
    "article",
    "aside",
    "br",
    "caption",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "h1",
    "h2",
    "h3",
    "h4",
    "header",
    "li",
    "nav",
    "ol",
    "option",
    "p",
    "pre",
    "section",
    "select",
    "summary",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "title",
    "tr",
    "ul",
    "svg",
    "text",
}


@dataclass
class Page:
    tags: Counter[str] = field(default_factory=Counter)
    attrs: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)

    @property
    def visible_text(self) -> str:
        return " ".join("".join(self.text).split())

    def with_tag(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.attrs if t == tag]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._skip = 0  # inside <style>/<script>: not visible text
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags[tag] += 1
        if tag in BLOCKS:
            self.page.text.append(" ")
        values = dict(attrs)
        self.page.attrs.append((tag, values))
        if values.get("id"):
            self.page.ids.append(values["id"] or "")
        if tag in ("style", "script"):
            self._skip += 1
            self._in_script = tag == "script"
            if self._in_script:
                self.page.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in BLOCKS:
            self.page.text.append(" ")
        if tag in ("style", "script") and self._skip:
            self._skip -= 1
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.page.scripts[-1] += data
        elif not self._skip:
            self.page.text.append(data)


def parse(html: str) -> Page:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector.page
