"""``dcnlab check``'s TCP transfers in memory: a failed transfer is named with its pair
and iperf3's own reason, so a flaky check says what went wrong instead of a count."""

from __future__ import annotations

from dcnlab.check import Transfers, _iperf3_error


def test_a_failed_transfer_is_reported_with_its_pair_and_iperf3s_reason() -> None:
    out = (b"Connecting to host 10.0.3.1, port 5207\n"
           b"iperf3: error - unable to connect to server - server may have stopped running "
           b"or use a different port, firewall issue, etc.: Connection refused\n")
    assert _iperf3_error(out).startswith("iperf3: error - unable to connect to server")
    assert _iperf3_error(b"") == "no output"
    assert _iperf3_error(b"partial\nlast line\n") == "last line"
    transfers = Transfers([("h1", "h9"), ("h2", "h10")],
                          [("h2", "h10", "exit status 1: " + _iperf3_error(out))])
    assert transfers.done == 1
    line = transfers.failure()
    assert line is not None
    assert line.startswith("1 of 2 TCP transfers failed (h2->h10: exit status 1: iperf3: "
                           "error - unable to connect")
    assert Transfers([("h1", "h9")]).failure() is None


def test_many_failures_show_four_and_count_the_rest() -> None:
    pairs = [(f"h{i}", f"h{i + 8}") for i in range(1, 8)]
    line = Transfers(pairs, [(a, b, "no end within 120 s") for a, b in pairs]).failure()
    assert line is not None
    assert line.count("no end within 120 s") == 4 and line.endswith("; and 3 more)")
    assert line.startswith("7 of 7 TCP transfers failed (h1->h9:")
