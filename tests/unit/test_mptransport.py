"""The multipath transport's Python wrapper and `dcnlab mp` on loopback (no namespaces)."""

from __future__ import annotations

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
    # t = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3026527... (scipy.stats.t.ppf(0.975, 2) agrees).
    t_975_2 = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    # The script's table rounds t to 3 decimals: allow that rounding (0.0005), no more.
    assert abs(ci95([100.0, 110.0, 90.0]) - t_975_2 * 10 / 3 ** 0.5) <= 0.0005 * 10 / 3 ** 0.5
    assert "+10.0%" in table(summarize(rows))
