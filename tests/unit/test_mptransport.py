"""The multipath transport's Python wrapper and `dcnlab mp` on loopback (no namespaces)."""

from __future__ import annotations

import math

import pytest

from dcnlab import cli
from dcnlab.hosts import mptransport as mp


def test_unknown_scheduler_lists_the_valid_ones():
    with pytest.raises(mp.MpError) as err:
        mp.check_scheduler("fastest")
    for name in mp.SCHEDULERS:
        assert name in str(err.value)


@pytest.mark.built  # runs dcnlab-mp
def test_wrapper_and_binary_agree_on_scheduler_names():
    import subprocess

    out = subprocess.run([mp.binary(), "schedulers"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert tuple(out) == mp.SCHEDULERS


@pytest.mark.built  # runs dcnlab-mp
def test_loopback_transfer_with_two_subflows_per_scheduler():
    server = mp.Server("127.0.0.1:0", count=len(mp.SCHEDULERS)).start()
    try:
        for name in mp.SCHEDULERS:
            res = mp.send([server.address], "256KB", name, via=["127.0.0.1", "127.0.0.2"],
                          timeout=60)
            assert res["intact"] is True, res
            assert res["size"] == 256 * 1024
            assert len(res["subflows"]) == 2
            assert res["fct_ms"] > 0
    finally:
        lines = server.stop()
    assert [ln["intact"] for ln in lines if "conn" in ln] == [True] * len(mp.SCHEDULERS)


@pytest.mark.built  # runs dcnlab-mp
def test_cli_mp_delegates_and_reports_bad_input(capfd):
    assert cli.main(["mp", "send", "--to", "127.0.0.1:9", "--size", "1MB",
                     "--scheduler", "fastest"]) == 2
    assert "valid: minrtt, roundrobin, redundant, ecf, blest, cfs" in capfd.readouterr().err
    assert cli.main(["mp", "send", "--to", "127.0.0.1:9", "--size", "lots"]) == 2
    assert "bad size" in capfd.readouterr().err
    assert cli.main(["mp", "schedulers"]) == 0
    assert "cfs" in capfd.readouterr().out


def test_seed003_summary_means_intervals_and_change_against_minrtt():
    from dcnlab.benchmarks.seed003_fct import ci95, summarize, table

    rows = [{"size": "64KB", "scheduler": "minrtt", "fct_ms": v, "dup_bytes": 0,
             "peak_reorder_bytes": 10} for v in (100.0, 110.0, 90.0)]
    rows += [{"size": "64KB", "scheduler": "cfs", "fct_ms": v, "dup_bytes": 30,
              "peak_reorder_bytes": 0} for v in (90.0, 90.0, 90.0)]
    rows += [{"size": "64KB", "scheduler": "tcp-path1", "fct_ms": 120.0}]
    s = {r["scheduler"]: r for r in summarize(rows)}
    assert s["minrtt"]["fct_ms"] == 100.0 and s["minrtt"]["vs_minrtt_pct"] == 0.0
    assert s["cfs"]["vs_minrtt_pct"] == 10.0 and s["cfs"]["dup_bytes"] == 30
    assert s["cfs"]["ci95_ms"] == 0.0
    assert s["tcp-path1"]["vs_minrtt_pct"] == -20.0 and s["tcp-path1"]["n"] == 1
    # Half-width t(0.975, 2) * sd / sqrt(3) with sd 10 (deviations -10, 0, 10: sqrt(200 / 2)).
    # Student's t with 2 degrees of freedom has the closed-form CDF
    # F(t) = 1/2 + t / (2 sqrt(2 + t^2)); F(t) = 0.975 gives t / sqrt(2 + t^2) = 0.95, so
    # t = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3026527...
    t_975_2 = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    assert abs(ci95([100.0, 110.0, 90.0]) - t_975_2 * 10 / 3 ** 0.5) < 1e-9
    # 40 values, 20 of 90 and 20 of 110: mean 100, every deviation 10, so sd =
    # sqrt(40 * 100 / 39) and the half-width is t(0.975, 39) * 10 / sqrt(39).  Past 30
    # degrees of freedom the quantile is still well above the normal's 1.96 (2.0227).
    values = [90.0, 110.0] * 20
    assert abs(ci95(values) - _t975_odd(39) * 10 / 39 ** 0.5) < 1e-9
    assert "+10.0%" in table(summarize(rows))


def _t975_odd(df: int) -> float:
    """t(0.975, df) for odd df, without scipy: Student's t with odd df has the closed-form
    CDF (Abramowitz and Stegun 26.7.3) F(t) = 1/2 + A/2 with theta = atan(t / sqrt(df)),
    A = (2 / pi) (theta + sin(theta) sum_{k=0}^{(df-3)/2} c_k cos(theta)^(2k+1)),
    c_0 = 1, c_k = c_{k-1} * 2k / (2k + 1); F rises with t, so bisection finds F(t) =
    0.975 (to about 1e-15).  Checked against df = 1, where F(t) = 1/2 + atan(t) / pi
    gives t = tan(0.475 pi) = 12.7062..., and df = 3 against Student's table (3.182)."""
    def cdf(t: float) -> float:
        theta = math.atan(t / math.sqrt(df))
        total, c = 0.0, 1.0
        for k in range((df - 1) // 2):
            if k:
                c *= 2 * k / (2 * k + 1)
            total += c * math.cos(theta) ** (2 * k + 1)
        return 0.5 + (theta + math.sin(theta) * total) / math.pi

    low, high = 0.0, 100.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < 0.975 else (low, mid)
    return (low + high) / 2


def test_the_closed_form_t_quantile_matches_known_values():
    # the closed form above against what needs no series: df 1 (Cauchy), and Student's
    # 3-decimal table for df 3 and 39
    assert abs(_t975_odd(1) - math.tan(0.475 * math.pi)) < 1e-12
    assert round(_t975_odd(3), 3) == 3.182
    assert round(_t975_odd(39), 3) == 2.023
