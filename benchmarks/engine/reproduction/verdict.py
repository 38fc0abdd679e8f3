"""THE rule: a claim's verdict from its measured interval, and nothing else.

Hand-written verdicts drift from the data they describe; here a verdict is a pure
function of the measured comparison and the paper's value and direction, the same for
every claim of every paper.  The rule is stated once, in :data:`RULE` below: every
generated document prints that text, docs/reproductions.md quotes it (a test keeps the
two equal), and the functions of this module are its code, line for line --
:func:`per_seed` and :func:`per_flow` the measured comparison (reusing
metrics.ratio_ci and metrics.mean_ci, the summary's own intervals), :func:`verdict` the
four verdicts, :func:`seeds_needed` the seeds (flow pairs) an inconclusive claim would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..metrics import CONFIDENCE, mean_ci, ratio_ci

REPRODUCED = "reproduced"
DIRECTION = "direction"
INCONCLUSIVE = "inconclusive"
OPPOSITE = "opposite"
VERDICTS = (REPRODUCED, DIRECTION, INCONCLUSIVE, OPPOSITE)
RATIO, DIFFERENCE = "ratio", "difference"
LOWER, HIGHER = "lower", "higher"
NO_CHANGE = {RATIO: 1.0, DIFFERENCE: 0.0}
SEEDS_LIMIT = 100
UNKNOWN = "unknown"

RULE = """\
**Measured comparison**, per claim and sweep value:

- *ratio*: per seed `r = scheme / baseline` (the same seed is the same flow list under
  both); the geometric mean `exp(m)`, `m = mean(log r)`, with the 95 % interval
  `exp(m ± t(0.975, n-1) · s / √n)`, `s = sd(log r)`; seeds where either value is
  missing or not positive are left out and counted;
- *difference*: per seed `d = scheme - baseline`; the mean and its 95 % Student-t
  interval;
- *per flow*: the geometric mean of the paired per-flow ratios (the same flow under the
  scheme and the baseline) and its 95 % interval, flows taken as independent samples
  (narrower than the per-seed interval; labelled "per flow").

**Verdict**, with `[lo, hi]` the interval, `n0` no change (1 for a ratio, 0 for a
difference) and `p` the paper's value:

- **reproduced**: the interval excludes `n0` on the paper's side (`hi < n0` for
  direction lower, `lo > n0` for higher) and contains `p` (`lo ≤ p ≤ hi`);
- **direction**: it excludes `n0` on the paper's side but does not contain `p`, or the
  paper states no value (its direction only);
- **inconclusive**: it contains `n0` (`lo ≤ n0 ≤ hi`), or there is no interval (fewer
  than two seeds or flows);
- **opposite**: it excludes `n0` on the other side.

**Needed to decide** (inconclusive claims only): the smallest number of seeds (of flow
pairs, per flow) `n` from 2 to 100 with `t(0.975, n-1) · s / √n < |m - n0|`, from the
observed `m` and `s` (on the log scale for a ratio, where no change is 0); "> 100" when
there is none; "unknown" when `m` is no change or `s` is undefined. It assumes the
spread stays as observed: a guide to the next run, not a promise.
"""


@dataclass(frozen=True)
class Measured:
    """A claim's measured comparison at one sweep value."""

    compare: str  # ratio | difference
    per: str  # seed | flow
    n: int  # seeds (per flow: flow pairs) in the interval
    estimate: float  # the ratio's geometric mean, or the mean difference
    low: float  # the 95 % interval; nan without one (n < 2)
    high: float
    centre: float  # m: the estimate on the rule's scale (log of a ratio; a difference)
    spread: float  # s: the sample standard deviation on that scale (nan with n < 2)
    left_out: int = 0  # seeds with a value on one side only, or a ratio undefined

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def per_seed(compare: str, scheme: Mapping[int, float | None],
             baseline: Mapping[int, float | None]) -> Measured:
    """The per-seed comparison of ``scheme``'s and ``baseline``'s values ({seed: value};
    None or nan: no value), paired by seed."""
    seeds = sorted(set(scheme) | set(baseline))
    pairs = [(scheme[s], baseline[s]) for s in seeds
             if _finite(scheme.get(s)) and _finite(baseline.get(s))]
    if compare == RATIO:
        ratios = [a / b for a, b in pairs if a > 0 and b > 0]  # type: ignore[operator]
        scale = [math.log(r) for r in ratios]
        estimate, low, high = ratio_ci(ratios)
    else:
        scale = [a - b for a, b in pairs]  # type: ignore[operator]
        estimate, half = mean_ci(scale)
        low, high = estimate - half, estimate + half
    used = len(scale)
    centre = float(np.mean(scale)) if used else math.nan
    spread = float(np.std(scale, ddof=1)) if used > 1 else math.nan
    return Measured(compare, "seed", used, estimate, low, high, centre, spread,
                    sum(1 for s in seeds if _finite(scheme.get(s)) or
                        _finite(baseline.get(s))) - used)


def per_flow(ratio: float, low: float, high: float, pairs: int) -> Measured:
    """The per-flow comparison from paired.py's aggregate (geometric mean ratio and its
    interval over ``pairs`` flows); ``s`` is recovered from the interval's half-width on
    the log scale: ``s = half * sqrt(n) / t(0.975, n-1)``."""
    centre = math.log(ratio) if _finite(ratio) and ratio > 0 else math.nan
    spread = math.nan
    if pairs > 1 and _finite(low) and _finite(high) and low > 0 and math.isfinite(centre):
        half = math.log(high) - centre
        spread = half * math.sqrt(pairs) / _t(pairs)
    return Measured(RATIO, "flow", pairs, ratio, low, high, centre, spread)


def _t(n: int) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def verdict(measured: Measured, paper_value: float | None, direction: str) -> str:
    """THE rule (RULE): one of VERDICTS.  ``paper_value`` None: the paper states the
    direction only, and no interval contains a value that is not there."""
    if not measured.has_interval:
        return INCONCLUSIVE
    lo, hi, n0 = measured.low, measured.high, NO_CHANGE[measured.compare]
    ours, theirs = (hi < n0, lo > n0) if direction == LOWER else (lo > n0, hi < n0)
    if ours:
        contains = paper_value is not None and lo <= paper_value <= hi
        return REPRODUCED if contains else DIRECTION
    return OPPOSITE if theirs else INCONCLUSIVE


def seeds_needed(measured: Measured, limit: int = SEEDS_LIMIT) -> str:
    """For an inconclusive comparison, the smallest n (2..limit) whose interval, at the
    observed centre and spread, would exclude no change: ``"7"``, ``"> 100"`` or
    ``"unknown"`` (module doc)."""
    distance = abs(measured.centre)  # no change is 0 on the rule's scale
    if not (math.isfinite(distance) and math.isfinite(measured.spread)) or distance == 0:
        return UNKNOWN
    for n in range(2, limit + 1):
        if _t(n) * measured.spread / math.sqrt(n) < distance:
            return str(n)
    return f"> {limit}"
