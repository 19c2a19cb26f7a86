"""The figure check of the end-to-end tests (tests/helpers/figcheck.py) against figures whose content is
known: it must pass drawn figures and fail a blank figure, empty axes, one empty panel among
drawn ones, a line of NaNs and a two-page PDF."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from helpers.figcheck import check_figure, data_axes  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def save(fig: Figure, folder: Path) -> tuple[Path, Path]:
    """As the workflow saves a figure (aggregate.figure): PNG and PDF at dpi 150, no tight box."""
    png, pdf = folder / "f.png", folder / "f.pdf"
    for path in (png, pdf):
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return png, pdf


def lines(*axes: Axes) -> None:
    t = np.linspace(0, 10, 200)
    for k, ax in enumerate(axes):
        ax.plot(t, np.sin(t + k), label="sin")
        ax.set_xlabel("t")


def heatmap_with_colorbar() -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for k, ax in enumerate(axes):
        mesh = ax.pcolormesh(np.add.outer(np.arange(10.0), np.arange(12.0)) * (k + 1))
    fig.colorbar(mesh, ax=axes)
    return fig


def uniform_map() -> Figure:
    """A panel in one colour (the uniform attention of paper 002 at step 0) is drawn, not empty."""
    fig, ax = plt.subplots()
    ax.imshow(np.full((3, 3), 1 / 3), vmin=0, vmax=1)
    return fig


@pytest.mark.parametrize("draw", [heatmap_with_colorbar, uniform_map])
def test_drawn_figures_pass(draw: Callable[[], Figure], tmp_path: Path) -> None:
    fig = draw()
    panels = data_axes(fig)
    assert check_figure(*save(fig, tmp_path), panels=panels) == []


def test_line_plots_pass(tmp_path: Path) -> None:
    fig, axes = plt.subplots(2, 2)
    lines(*axes.flat)
    assert data_axes(fig) == 4
    assert check_figure(*save(fig, tmp_path), panels=4) == []


def test_blank_figure_fails(tmp_path: Path) -> None:
    problems = check_figure(*save(plt.figure(), tmp_path))
    assert any("no axes holds data" in p for p in problems) and any("distinct colours" in p for p in problems)


def test_empty_axes_fail(tmp_path: Path) -> None:
    fig, axes = plt.subplots(2, 2)
    for ax in axes.flat:
        ax.set_title("nothing here")
    problems = check_figure(*save(fig, tmp_path), panels=4)
    assert problems == ["f.pdf: 0 axes hold data, not 4"]


def test_one_empty_panel_among_drawn_ones_fails(tmp_path: Path) -> None:
    fig, axes = plt.subplots(1, 3)
    lines(axes[0], axes[2])
    panels = data_axes(fig)  # 3: the middle axes exists, so it should hold data
    assert check_figure(*save(fig, tmp_path), panels=panels) == ["f.pdf: 2 axes hold data, not 3"]


def test_nan_data_fails(tmp_path: Path) -> None:
    """Artists whose data are all NaN are clipped to their axes but draw nothing: the PNG shows it."""
    fig, ax = plt.subplots()
    ax.plot(np.arange(5.0), np.full(5, np.nan))
    ax.imshow(np.full((4, 4), np.nan))
    problems = check_figure(*save(fig, tmp_path), panels=1)
    assert len(problems) == 1 and "0.000% of its pixels drawn" in problems[0]


def test_two_pages_fail(tmp_path: Path) -> None:
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    fig, ax = plt.subplots()
    lines(ax)
    fig.savefig(png, dpi=150)
    with PdfPages(pdf) as pages:
        pages.savefig(fig)
        pages.savefig(fig)
    plt.close(fig)
    assert check_figure(png, pdf, panels=1) == ["f.pdf: 2 pages, not 1"]
