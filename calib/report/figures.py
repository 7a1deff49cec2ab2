"""What every study kind's figures share: matplotlib settings, the palette, SVG text and its inlining.

Each kind draws its own figures (:mod:`calib.report.functional.figures`, :mod:`calib.report.extraction.figures`,
:mod:`calib.report.probes.figures`) with matplotlib's SVG backend (no display, no pyplot state).
Output is deterministic (fixed hash salt, no date), and :func:`inline_svg` turns a file's SVG into an
element that can sit in an HTML page beside others (no XML prolog, ids prefixed per figure).
"""

from __future__ import annotations

import io
import re

from matplotlib.figure import Figure

__all__ = ["COLORS", "RC", "inline_svg", "to_svg"]

#: matplotlib settings of every figure: a fixed hash salt (same bytes every time), text as text, no top/right spines.
RC = {"svg.hashsalt": "calib-report", "svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
      "axes.spines.right": False}
#: The palette, in order.
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
          "#64b5cd")


def to_svg(fig: Figure, *, tight: bool | None = None) -> str:
    """The figure as SVG text (no date: the same figure gives the same bytes).

    ``tight`` crops the page to what is drawn, which costs a second drawing of the whole figure; by default
    only figures without a layout engine are cropped (a constrained or tight layout already fits the page).
    """
    if tight is None:
        tight = fig.get_layout_engine() is None
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight" if tight else None, metadata={"Date": None})
    return buffer.getvalue()


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_COMMENT = re.compile(r"<!--.*?-->\s*", re.S)


def inline_svg(svg: str, prefix: str, label: str) -> str:
    """``svg`` as an element for an HTML page: no prolog, comments or metadata; ids prefixed by ``prefix``.

    Several figures in one page then cannot clash on ids (matplotlib numbers them per figure).
    """
    text = _COMMENT.sub("", _METADATA.sub("", _PROLOG.sub("", svg, count=1)))
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = text.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')
    label = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" class="figure" ', 1).strip()
