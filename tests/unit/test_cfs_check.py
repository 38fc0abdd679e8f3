"""The cfs check's rule for an unused path, in memory: a path that carried nothing counts
against a scheduler only when the transfer outlasted that path's first possible byte
(its handshake and a one-way delay, 1.5 RTT): CFS rightly leaves out a path that could
not deliver before the fast one finishes (a 1 MB transfer on twopath often does)."""

from __future__ import annotations

from typing import Any

from dcnlab.schemes.cfs.check import path_unused


def _result(fct_ms: float, *subflows: tuple[int, float]) -> dict[str, Any]:
    return {"fct_ms": fct_ms, "subflows": [{"bytes": b, "srtt_ms": rtt} for b, rtt in subflows]}


def test_a_path_unused_in_a_transfer_shorter_than_its_first_byte_is_not_judged() -> None:
    # the suite's failure: 1 MB in 292 ms on the fast path, the slow one's RTT 300 ms
    assert path_unused(_result(292.7, (1 << 20, 32.2), (0, 300.4))) is None


def test_a_path_unused_in_a_transfer_that_outlasted_it_is_a_failure() -> None:
    assert path_unused(_result(1200.0, (64 << 20, 30.0), (0, 300.0))) is True
    assert path_unused(_result(451.0, (1 << 20, 30.0), (0, 300.0))) is True


def test_every_path_carrying_data_is_both_paths_whatever_the_length() -> None:
    assert path_unused(_result(120.0, (60_000, 30.0), (5_536, 300.0))) is False
    assert path_unused(_result(1200.0, (50 << 20, 30.0), (14 << 20, 300.0))) is False


def test_a_subflow_not_connected_by_the_end_cannot_be_judged() -> None:
    # 64 KB with CFS in 122 ms: the slow subflow's handshake (no RTT yet) was still on
    assert path_unused(_result(122.3, (65536, 28.7), (0, 0.0))) is None
