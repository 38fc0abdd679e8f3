"""Empirical flow-size distributions read from two-column CDF files.

A CDF file has one point per line, ``bytes cumulative-probability``; ``#`` starts a
comment.  Sizes must not decrease, probabilities must not decrease, and the last
probability must be 1.  Between two points the distribution is uniform, i.e. the CDF is
interpolated linearly -- the convention of the DCTCP/VL2 workload files.  If the first
point has a probability above 0, that much mass sits exactly at the first size.

Built-in distributions (``benchmarks/workloads/*.cdf``) are found by name:
``websearch`` and ``datamining``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

BUILTIN_PACKAGE = "dcnlab.benchmarks"
BUILTIN_DIR = "workloads"


class CdfError(ValueError):
    """A CDF file or name that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class EmpiricalCdf:
    """A piecewise-linear CDF over flow sizes in bytes."""

    name: str
    sizes: tuple[float, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        _validate(self.name, list(zip(self.sizes, self.probs, strict=True)))

    # -- sampling and moments ---------------------------------------------

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n sizes in whole bytes (at least 1) by inverse-transform sampling."""
        u = rng.random(n)
        return np.maximum(1, np.rint(self.quantile(u))).astype(np.int64)

    def quantile(self, u: np.ndarray | float) -> np.ndarray:
        """Inverse CDF.  Flat CDF segments (no mass) are never returned inside."""
        probs, sizes = np.asarray(self.probs), np.asarray(self.sizes)
        q = np.asarray(u, dtype=float)
        # Segment i holds probs[i-1] < u <= probs[i]; a flat segment (equal probabilities)
        # can hold no u.  i == 0: u at or below the first probability, the point mass.
        i = np.clip(np.searchsorted(probs, q, side="left"), 0, len(probs) - 1)
        lo = np.maximum(i - 1, 0)
        dp = probs[i] - probs[lo]
        frac = np.divide(q - probs[lo], dp, out=np.zeros_like(q), where=dp > 0)
        return np.where(i == 0, sizes[0], sizes[lo] + frac * (sizes[i] - sizes[lo]))

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """P(size <= x) under linear interpolation."""
        return np.interp(x, np.asarray(self.sizes), np.asarray(self.probs), left=0.0,
                         right=1.0)

    def mean(self) -> float:
        """Exact mean: each segment is uniform, so it contributes dp * (x0 + x1) / 2."""
        sizes, probs = np.asarray(self.sizes), np.asarray(self.probs)
        point_mass = probs[0] * sizes[0]
        return float(point_mass + np.sum(np.diff(probs) * (sizes[:-1] + sizes[1:]) / 2))


def parse_cdf_text(text: str, name: str) -> EmpiricalCdf:
    points: list[tuple[float, float]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise CdfError(f"{name}:{lineno}: expected 'bytes probability', got {raw.strip()!r}")
        try:
            size, prob = float(fields[0]), float(fields[1])
        except ValueError:
            raise CdfError(f"{name}:{lineno}: not numbers: {raw.strip()!r}") from None
        points.append((size, prob))
    _validate(name, points)
    return EmpiricalCdf(name, tuple(p[0] for p in points), tuple(p[1] for p in points))


def _validate(name: str, points: list[tuple[float, float]]) -> None:
    if len(points) < 2:
        raise CdfError(f"{name}: a CDF needs at least two points")
    for i, (size, prob) in enumerate(points):
        if not np.isfinite(size) or size < 0:
            raise CdfError(f"{name}: point {i + 1}: size {size} must be finite and >= 0")
        if not 0.0 <= prob <= 1.0:
            raise CdfError(f"{name}: point {i + 1}: probability {prob} is outside [0, 1]")
        if i and size < points[i - 1][0]:
            raise CdfError(f"{name}: point {i + 1}: sizes must not decrease "
                           f"({points[i - 1][0]} then {size})")
        if i and prob < points[i - 1][1]:
            raise CdfError(f"{name}: point {i + 1}: probabilities must not decrease "
                           f"({points[i - 1][1]} then {prob})")
    if abs(points[-1][1] - 1.0) > 1e-9:
        raise CdfError(f"{name}: the last probability must be 1, got {points[-1][1]}")


def builtin_names() -> list[str]:
    folder = resources.files(BUILTIN_PACKAGE).joinpath(BUILTIN_DIR)
    return sorted(p.name.removesuffix(".cdf") for p in folder.iterdir()
                  if p.name.endswith(".cdf"))


def load_cdf(name_or_path: str | Path, base_dir: Path | None = None) -> EmpiricalCdf:
    """A built-in distribution by name, else a CDF file (relative to base_dir)."""
    text = str(name_or_path)
    if text in builtin_names():
        resource = resources.files(BUILTIN_PACKAGE).joinpath(BUILTIN_DIR, text + ".cdf")
        return parse_cdf_text(resource.read_text(), text)
    path = Path(text)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise CdfError(f"{text!r} is neither a built-in distribution "
                       f"({', '.join(builtin_names())}) nor a readable file")
    try:
        content = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CdfError(f"{path}: cannot read: {exc}") from None
    return parse_cdf_text(content, str(path))
