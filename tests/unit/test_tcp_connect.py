"""The tcp_connect tool's echo server: it answers every line, and closes a connection only
once it has been quiet for the chosen timeout (issue #15: a test whose client stayed quiet
exactly as long as the server's default timeout was reset about 1 run in 3)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from dcnlab.benchmarks import tcp_connect


def _serve_pair(timeout: float) -> tuple[socket.socket, threading.Thread]:
    client, server = socket.socketpair()
    client.settimeout(10.0)
    thread = threading.Thread(target=tcp_connect._handle, args=(server, timeout), daemon=True)
    thread.start()
    return client, thread


def test_a_connection_quiet_for_less_than_the_timeout_is_served() -> None:
    client, thread = _serve_pair(timeout=5.0)
    with client:
        client.sendall(b"a\n")
        assert client.recv(1) == b"!"
        time.sleep(0.5)
        client.sendall(b"b\n")
        assert client.recv(1) == b"!"
    thread.join(timeout=10)
    assert not thread.is_alive()  # the client's close ends the handler


def test_a_connection_quiet_past_the_timeout_is_closed() -> None:
    client, thread = _serve_pair(timeout=0.3)
    with client:
        client.sendall(b"a\n")
        assert client.recv(1) == b"!"
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert client.recv(1) == b""  # closed by the server


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_serve_rejects_a_timeout_that_is_not_positive(value: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with pytest.raises(SystemExit):
        tcp_connect.main(["serve", "--port", "7000", "--timeout", value])
    assert "--timeout must be positive" in capsys.readouterr().err
