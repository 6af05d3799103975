"""A small, dependency-free HTML page builder for qsim's reports (escaped text, tables, images)."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Sequence

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.note { color: #555; font-size: 0.9em; } .bad { color: #b00; font-weight: bold; }
"""


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


@dataclass
class Page:
    title: str
    parts: list[str] = field(default_factory=list)

    def heading(self, text: str) -> "Page":
        self.parts.append(f"<h2>{html.escape(text)}</h2>")
        return self

    def paragraph(self, text: str, css: str = "") -> "Page":
        cls = f' class="{css}"' if css else ""
        self.parts.append(f"<p{cls}>{html.escape(text)}</p>")
        return self

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> "Page":
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
        self.parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        return self

    def image(self, filename: str, alt: str) -> "Page":
        self.parts.append(f'<img src="{html.escape(filename)}" alt="{html.escape(alt)}">')
        return self

    def render(self) -> str:
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(self.title)}</title><style>{_STYLE}</style></head>"
                f"<body><h1>{html.escape(self.title)}</h1>\n" + "\n".join(self.parts) + "\n</body></html>\n")
