"""A stop (Ctrl-C, SIGTERM) that lands during clean-up waits for the clean-up, then
reaches the handler it was sent to; one ignored when clean-up began stays ignored.  In
memory: real signals to this process, no network."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from dcnlab.topo.teardown import deferred_interrupts


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # as dcnlab run turns SIGTERM into a clean stop


@pytest.fixture
def sigterm_interrupts() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_during_clean_up_is_delivered_after_it(sigterm_interrupts: None) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("after the signal")  # clean-up goes on
            with deferred_interrupts():  # a nested block (the network's own stop)
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("nested")
            steps.append("after the nested block")  # held by the outer block
    assert steps == ["after the signal", "nested", "after the nested block"]
    assert signal.getsignal(signal.SIGTERM) is _interrupt  # restored


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_nothing_is_raised_without_a_signal(sigterm_interrupts: None) -> None:
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
