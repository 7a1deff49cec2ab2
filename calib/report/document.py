"""A tiny document model and its two renderings: self-contained HTML and Markdown.

The sections build a list of blocks once; :func:`to_html` and :func:`to_markdown` render the same
blocks, so both files say the same thing. Text may use two inline marks: ```code``` and ``**bold**``.
The HTML page carries its CSS inline and its figures as inline SVG; it loads nothing.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from calib.report.figures import inline_svg

__all__ = ["Block", "Bullets", "Code", "CodeRow", "Figure", "Group", "Heading", "Markup", "Paragraph", "Table",
           "to_html", "to_markdown"]


@dataclass(frozen=True)
class Heading:
    """A section heading; ``anchor`` is its HTML id (and the table of contents' link target)."""

    level: int
    text: str
    anchor: str


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of text (inline marks allowed)."""

    text: str


@dataclass(frozen=True)
class Bullets:
    """A bulleted list (inline marks allowed in each item)."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table: ``header`` and ``rows`` of cells (inline marks allowed); ``anchor`` is its HTML id."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    anchor: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """An SVG figure, inline in HTML and the file ``figures/NAME.svg`` in Markdown."""

    name: str
    svg: str
    caption: str


@dataclass(frozen=True)
class Code:
    """A block of code with a title (e.g. "x", "target completion")."""

    title: str
    code: str | None
    language: str = ""


@dataclass(frozen=True)
class CodeRow:
    """Code blocks shown side by side in HTML, one after the other in Markdown."""

    blocks: tuple[Code, ...]


@dataclass(frozen=True)
class Group:
    """Blocks kept together: an HTML ``<section>`` with a class and id; plain blocks in Markdown."""

    css_class: str
    anchor: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Markup:
    """Prepared output for both renderings: ``html`` placed as is in report.html, ``markdown`` in report.md.

    :func:`calib.report.write.write_report` substitutes it where the block stands (the document
    model has no raw block); ``name`` makes its placeholder unique.
    """

    name: str
    html: str
    markdown: str


Block = Heading | Paragraph | Bullets | Table | Figure | CodeRow | Group

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline_html(text: str) -> str:
    out = html.escape(text, quote=False)
    out = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", out)
    return _BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", out)


def _cell_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _fence(code: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)


def _md(block: Block, figure_dir: str) -> list[str]:
    if isinstance(block, Heading):
        return ["#" * block.level + " " + block.text, ""]
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items] + [""]
    if isinstance(block, Table):
        lines = [f"*{block.caption}*", ""] if block.caption else []
        lines.append("| " + " | ".join(_cell_md(c) for c in block.header) + " |")
        lines.append("|" + "|".join(" --- " for _ in block.header) + "|")
        lines += ["| " + " | ".join(_cell_md(c) for c in row) + " |" for row in block.rows]
        return lines + [""]
    if isinstance(block, Figure):
        return [f"![{block.caption}]({figure_dir}/{block.name}.svg)", "", f"*{block.caption}*", ""]
    if isinstance(block, CodeRow):
        lines = []
        for code in block.blocks:
            body = code.code if code.code is not None else "(none)"
            fence = _fence(body)
            lines += [f"**{code.title}**", "", f"{fence}{code.language if code.code is not None else ''}",
                      body.rstrip("\n"), fence, ""]
        return lines
    lines = []
    for inner in block.blocks:
        lines += _md(inner, figure_dir)
    return lines


def to_markdown(blocks: list[Block], *, figure_dir: str = "figures") -> str:
    """The blocks as Markdown; figures are image links to ``FIGURE_DIR/NAME.svg``."""
    lines: list[str] = []
    for block in blocks:
        lines += _md(block, figure_dir)
    return "\n".join(lines).rstrip("\n") + "\n"


def _html(block: Block) -> str:
    if isinstance(block, Heading):
        return f'<h{block.level} id="{html.escape(block.anchor)}">{_inline_html(block.text)}</h{block.level}>'
    if isinstance(block, Paragraph):
        return f"<p>{_inline_html(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Table):
        anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
        caption = f"<caption>{_inline_html(block.caption)}</caption>" if block.caption else ""
        head = "".join(f"<th>{_inline_html(c)}</th>" for c in block.header)
        body = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return f'<div class="scroll"><table{anchor}>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>' \
               "</table></div>"
    if isinstance(block, Figure):
        svg = inline_svg(block.svg, f"fig-{block.name}", block.caption)
        return f'<figure id="figure-{html.escape(block.name)}">{svg}<figcaption>{_inline_html(block.caption)}' \
               "</figcaption></figure>"
    if isinstance(block, CodeRow):
        cells = []
        for code in block.blocks:
            body = html.escape(code.code, quote=False) if code.code is not None else '<span class="none">(none)</span>'
            cells.append(f'<div class="code"><div class="title">{_inline_html(code.title)}</div><pre><code>{body}'
                         "</code></pre></div>")
        return f'<div class="side-by-side">{"".join(cells)}</div>'
    inner = "\n".join(_html(b) for b in block.blocks)
    return f'<section class="{html.escape(block.css_class)}" id="{html.escape(block.anchor)}">\n{inner}\n</section>'


_CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0;background:#fff}
main{max-width:1200px;margin:0 auto;padding:1.5rem 2rem 4rem}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2.2rem}
h3{margin-top:1.6rem}code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
p code,li code,td code{background:#f3f4f6;padding:0 .25em;border-radius:3px}
.scroll{overflow-x:auto}table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:13px}
caption{text-align:left;font-style:italic;padding-bottom:.3rem}
th,td{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}tbody tr:nth-child(even){background:#fbfbfc}
figure{margin:1rem 0}figure svg{max-width:100%;height:auto}figcaption{font-style:italic;font-size:13px}
.side-by-side{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:.6rem}
.code .title{font-weight:600;font-size:13px;margin-bottom:.2rem}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:4px;padding:.5rem;overflow-x:auto;margin:0}
.none{color:#8c959f;font-style:italic}
.example{border:1px solid #d0d7de;border-radius:6px;padding:0 1rem 1rem;margin:1.2rem 0}
nav ul{columns:2}
""".strip()


def _toc(blocks: list[Block]) -> str:
    items = [f'<li><a href="#{html.escape(b.anchor)}">{_inline_html(b.text)}</a></li>'
             for b in blocks if isinstance(b, Heading) and b.level == 2]
    return f'<nav aria-label="contents"><ul>{"".join(items)}</ul></nav>' if items else ""


def to_html(blocks: list[Block], *, title: str) -> str:
    """The blocks as one self-contained HTML page (inline CSS and SVG; no script, no external resource)."""
    # the table of contents goes after the title and its introduction, before the first section
    cut = next((i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 2), len(blocks))
    first, rest = blocks[:cut], blocks[cut:]
    body = "\n".join([*(_html(b) for b in first), _toc(rest), *(_html(b) for b in rest)])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n<main>\n"
            f"{body}\n</main>\n</body>\n</html>\n")
