"""What a saved figure shows, read from its matplotlib objects (not from the PNG): the
plot tests check axes, series and intervals instead of only that a file exists.

``saved_figures(monkeypatch)`` records every Figure saved while the test runs, by file
name; the helpers below read its panels.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure


def saved_figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """{file name: Figure} of every figure saved from now on (plt.close() leaves a closed
    figure's axes and artists readable)."""
    saved: dict[str, Figure] = {}
    real = Figure.savefig

    def spy(self: Figure, fname: object, *args: object, **kwargs: object) -> None:
        saved[Path(str(fname)).name] = self
        real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return saved


def panels(fig: Figure) -> list[Axes]:
    return list(fig.axes)


def bar_series(ax: Axes) -> list[str]:
    """The label of each ax.bar() call (one per scheme)."""
    return [c.get_label() for c in ax.containers if isinstance(c, BarContainer)]


def bar_heights(ax: Axes, label: str) -> list[float]:
    bars = next(c for c in ax.containers
                if isinstance(c, BarContainer) and c.get_label() == label)
    return [p.get_height() for p in bars.patches]


def line_series(ax: Axes) -> list[str]:
    """Labels of the lines that carry data (not axhline/axvline helpers: no label)."""
    return [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def errorbar_series(ax: Axes) -> list[str]:
    """The label of each ax.errorbar() call (a bar's own whiskers have none)."""
    return [c.get_label() for c in ax.containers
            if isinstance(c, ErrorbarContainer) and not c.get_label().startswith("_")]


def scatter_points(ax: Axes) -> dict[str, list[tuple[float, float]]]:
    return {c.get_label(): [tuple(map(float, p)) for p in c.get_offsets()]
            for c in ax.collections if isinstance(c, PathCollection)}


def intervals(ax: Axes) -> list[tuple[float, float]]:
    """(low, high) of every error bar drawn in ``ax`` (bars' and lines' whiskers)."""
    out = []
    for c in ax.containers:
        if not isinstance(c, ErrorbarContainer):
            continue
        for coll in c.lines[2]:
            if isinstance(coll, LineCollection):
                for seg in coll.get_segments():
                    ys = [float(y) for _x, y in seg]
                    out.append((min(ys), max(ys)))
    return out


def has_data(ax: Axes) -> bool:
    """Some bar of finite non-zero height, some line with a finite point, or some scatter
    point: the panel is not empty."""
    for c in ax.containers:
        if isinstance(c, BarContainer) and any(
                math.isfinite(p.get_height()) and p.get_height() != 0 for p in c.patches):
            return True
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    lines += [c.lines[0] for c in ax.containers if isinstance(c, ErrorbarContainer)
              and not c.get_label().startswith("_") and c.lines[0] is not None]
    for ln in lines:
        y = np.asarray(ln.get_ydata(), dtype=float)
        if y.size and np.isfinite(y).any():
            return True
    return any(isinstance(c, PathCollection) and len(c.get_offsets()) for c in ax.collections)


def assert_readable(fig: Figure, name: str, xlabel: bool = True) -> None:
    """Every panel has data and a y label; the bottom row has x labels (``xlabel``; a
    figure whose ticks name categories may go without)."""
    assert panels(fig), name
    for ax in panels(fig):
        assert has_data(ax), (name, ax.get_title())
        assert ax.get_ylabel(), (name, ax.get_title())
    bottom = [ax for ax in panels(fig) if ax.get_subplotspec().is_last_row()]
    assert not xlabel or all(ax.get_xlabel() for ax in bottom), name
