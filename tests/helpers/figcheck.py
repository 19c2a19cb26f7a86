"""Is a saved figure drawn? Checks a matplotlib PNG and PDF pair without trusting the code that drew it.

The PDF gives the panels: matplotlib clips every data artist (line, image, mesh, scatter) of an
axes to that axes' rectangle and writes the clip as ``x y w h re W n`` in the page's content
stream, so the distinct clip rectangles are the axes that hold data; axes with nothing in them
(and colorbars, whose solids are not clipped) write none. The PNG, saved from the same figure
at the same size (no tight bounding box), is then cut at those rectangles, and each cut must hold
a visible drawing: enough pixels away from the figure's background colour. How many axes should
hold data comes from the figure object (``data_axes``), which a test can draw in-process.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Rect = tuple[float, float, float, float]  # x, y, width, height in PDF points, origin bottom left

#: a panel must differ from the figure's background in at least this fraction of its pixels
#: (a 1 px line across a panel covers about 0.5%; an empty panel 0)
MIN_INK = 0.001
#: a whole PNG: at least this many distinct colours (a blank one has 1)
MIN_FIGURE_COLOURS = 16

_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)
_CLIP = re.compile(rb"(-?[\d.]+) (-?[\d.]+) (-?[\d.]+) (-?[\d.]+) re\s+W\s+n")
_PAGE = re.compile(rb"/Type\s*/Page\b(?!s)")
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*\]")


def pdf_pages(pdf: Path) -> int:
    """Number of page objects in a PDF."""
    return len(_PAGE.findall(pdf.read_bytes()))


def pdf_panels(pdf: Path) -> tuple[tuple[float, float], list[Rect]]:
    """(page width, page height) in points and the distinct clip rectangles of the page contents."""
    raw = pdf.read_bytes()
    box = [float(v) for v in _MEDIABOX.search(raw).groups()]
    rects: set[Rect] = set()
    for match in _STREAM.finditer(raw):
        try:
            content = zlib.decompress(match.group(1))
        except zlib.error:  # not a Flate stream (an image, a font): no drawing operators
            continue
        rects.update(tuple(round(float(v), 1) for v in r) for r in _CLIP.findall(content))
    return (box[2] - box[0], box[3] - box[1]), sorted(rects)


def packed(pixels: np.ndarray) -> np.ndarray:
    """8-bit RGB of an (..., 3 or 4) float image in [0, 1], one int per pixel."""
    rgb = np.round(pixels[..., :3].reshape(-1, 3) * 255).astype(np.int64)
    return rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]


def colours(pixels: np.ndarray) -> np.ndarray:
    """Distinct colours of an image, as packed 8-bit RGB."""
    return np.unique(packed(pixels))


def background(pixels: np.ndarray) -> np.ndarray:
    """The most common RGB colour of an image (the figure's face colour), in [0, 1]."""
    values, counts = np.unique(packed(pixels), return_counts=True)
    mode = int(values[counts.argmax()])
    return np.array([mode >> 16 & 255, mode >> 8 & 255, mode & 255]) / 255


def ink(pixels: np.ndarray, paper: np.ndarray) -> float:
    """Fraction of pixels that differ from the colour ``paper`` by more than 5% in a channel.
    A panel filled with one colour (a uniform attention map) is all ink: only what shows the
    paper through counts as empty."""
    return float((np.abs(pixels[..., :3].reshape(-1, 3) - paper).max(-1) > 0.05).mean())


def data_axes(fig: Figure) -> int:
    """Axes of a drawn figure that should hold data: the visible ones that are not colorbars."""
    return sum(ax.get_visible() and ax.get_label() != "<colorbar>" for ax in fig.axes)


def check_figure(png: Path, pdf: Path, panels: int | None = None) -> list[str]:
    """Problems of a PNG/PDF pair drawn from one matplotlib figure; empty when it is drawn.

    ``panels``: the number of axes that should hold data (by default: at least one)."""
    import matplotlib.image

    problems = []
    if (pages := pdf_pages(pdf)) != 1:
        problems.append(f"{pdf.name}: {pages} pages, not 1")
    (width, height), rects = pdf_panels(pdf)
    if panels is None and not rects:
        problems.append(f"{pdf.name}: no axes holds data")
    elif panels is not None and len(rects) != panels:
        problems.append(f"{pdf.name}: {len(rects)} axes hold data, not {panels}")
    image = matplotlib.image.imread(png)
    if (n := len(colours(image))) < MIN_FIGURE_COLOURS:
        problems.append(f"{png.name}: {n} distinct colours")
    scale = image.shape[1] / width
    if abs(image.shape[0] / height - scale) > 0.01 * scale:
        problems.append(f"{png.name}: {image.shape[1]} x {image.shape[0]} px is not the PDF page's shape")
        return problems
    paper = background(image)
    for x, y, w, h in rects:
        top, bottom = round((height - y - h) * scale) + 3, round((height - y) * scale) - 3
        left, right = round(x * scale) + 3, round((x + w) * scale) - 3
        cut = image[max(top, 0):bottom, max(left, 0):right]
        where = f"{png.name}, panel at ({x}, {y}) pt"
        if cut.size == 0:
            problems.append(f"{where}: outside the image")
        elif (covered := ink(cut, paper)) < MIN_INK:
            problems.append(f"{where}: {covered:.3%} of its pixels drawn")
    return problems
