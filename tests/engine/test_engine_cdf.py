"""Flow-size CDFs: parsing, exact moments, and samples that follow the distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dcnlab.benchmarks.engine.cdf import CdfError, builtin_names, load_cdf, parse_cdf_text

# The published distributions, to check the shipped files against: web search from the
# DCTCP study (Alizadeh et al., SIGCOMM 2010), data mining from the VL2 study
# (Greenberg et al., SIGCOMM 2009).
WEB_SEARCH = [(0, 0), (10000, .15), (20000, .2), (30000, .3), (50000, .4), (80000, .53),
              (200000, .6), (1e6, .7), (2e6, .8), (5e6, .9), (1e7, .97), (3e7, 1)]
DATA_MINING = [(0, 0), (180, .1), (216, .2), (560, .3), (900, .4), (1100, .5), (1870, .6),
               (3160, .7), (10000, .8), (400000, .9), (3160000, .95), (1e8, .98), (1e9, 1)]


def test_builtin_files_match_the_published_tables() -> None:
    assert {"websearch", "datamining"} <= set(builtin_names())
    for name, table in (("websearch", WEB_SEARCH), ("datamining", DATA_MINING)):
        cdf = load_cdf(name)
        assert list(zip(cdf.sizes, cdf.probs, strict=True)) == [
            (float(s), float(p)) for s, p in table]


def test_mean_is_exact_for_piecewise_uniform_segments() -> None:
    cdf = parse_cdf_text("0 0\n100 0.5\n300 1\n", "t")
    # Half the mass uniform on [0, 100] (mean 50), half on [100, 300] (mean 200).
    assert cdf.mean() == pytest.approx(0.5 * 50 + 0.5 * 200)
    # Mass at the first point: 20% exactly at 1000 bytes.
    point = parse_cdf_text("1000 0.2\n2000 1\n", "t")
    assert point.mean() == pytest.approx(0.2 * 1000 + 0.8 * 1500)
    assert load_cdf("websearch").mean() == pytest.approx(1711250.0)


@pytest.mark.parametrize("name", ["websearch", "datamining"])
def test_samples_follow_the_cdf(name: str) -> None:
    cdf = load_cdf(name)
    sizes = cdf.sample(np.random.default_rng(7), 200_000)
    assert sizes.min() >= 1
    # Empirical CDF at every breakpoint within 0.005 of the file's probability.
    for size, prob in zip(cdf.sizes, cdf.probs, strict=True):
        assert np.mean(sizes <= size) == pytest.approx(prob, abs=0.005)
    # And everywhere (Kolmogorov-Smirnov against the interpolated CDF); sizes are
    # rounded to whole bytes, so compare at half a byte's resolution.
    ks = stats.kstest(sizes + 0.5, cdf.cdf)
    assert ks.statistic < 0.01
    assert np.mean(sizes) == pytest.approx(cdf.mean(), rel=0.05)


def test_flat_steps_and_quantiles() -> None:
    cdf = parse_cdf_text("10 0\n20 0.5\n30 0.5\n40 1\n", "t")
    assert cdf.quantile(0.25) == pytest.approx(15)
    assert cdf.quantile(0.75) == pytest.approx(35)
    sizes = cdf.sample(np.random.default_rng(1), 10_000)
    assert not np.any((sizes > 20) & (sizes < 30))  # no mass between 20 and 30


@pytest.mark.parametrize(("text", "message"), [
    ("0 0\n", "at least two points"),
    ("0 0\n10 0.5 x\n", "expected 'bytes probability'"),
    ("0 0\nten 1\n", "not numbers"),
    ("0 0\n10 0.5\n5 1\n", "sizes must not decrease"),
    ("0 0\n10 0.6\n20 0.5\n30 1\n", "probabilities must not decrease"),
    ("0 0\n10 0.9\n", "last probability must be 1"),
    ("0 0\n10 1.5\n", "outside [0, 1]"),
])
def test_bad_cdf_text_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(CdfError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_cdf_text(text, "bad.cdf")


def test_files_with_comments_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "mine.cdf").write_text("# my workload\n100 0  # smallest\n\n1000 1\n")
    cdf = load_cdf("mine.cdf", base_dir=tmp_path)
    assert cdf.sizes == (100.0, 1000.0)
    with pytest.raises(CdfError, match="neither a built-in"):
        load_cdf("nosuch.cdf", base_dir=tmp_path)
