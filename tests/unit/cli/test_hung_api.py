"""Every command that talks to the API gives up on a server that accepts connections and never
answers (a hung API server, a stuck proxy): one line, exit 1, in bounded time. Before, `token`
and `revoke` waited with no output until killed (issue 32: 400 s).

The server is a real listening socket that accepts and then says nothing; the bound is
$NODEMANAGER_REQUEST_TIMEOUT (1 s here, 5 s connect and 30 s read by default) per request,
with no retry of a timed-out read."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.unit.cli.test_errors import invoke, kubeconfig, one_line_error

LIMIT = 1.0
# Each command, once with the default limit pinned by the read timeout's value below.
COMMANDS = {
    "token": ["token", "--hostname", "h"],
    "revoke": ["revoke", "--hostname", "h"],
    "migrate": ["migrate"],
    "rollout status": ["rollout", "status", "configset/x"],
    "rollout history": ["rollout", "history", "configset/x"],
    "rollout pause": ["rollout", "pause", "configset/x"],
    "rollout undo": ["rollout", "undo", "configset/x"],
    "bootstrap": ["bootstrap", "--hostname", "h", "--kubeconfig", "{tmp}/node.kubeconfig"],
    "bootstrap --certificate": [
        "bootstrap",
        "--certificate",
        "--hostname",
        "h",
        "--kubeconfig",
        "{tmp}/node.kubeconfig",
    ],  # fmt: skip
}


class Silent:
    """A server that accepts every connection and never sends a byte; counts connections."""

    def __init__(self, port: int, held: list[socket.socket]):
        self.port, self.held = port, held


@pytest.fixture(scope="module")
def silent() -> Iterator[Silent]:
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield Silent(server.getsockname()[1], held)
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_server_that_never_answers_ends_the_command_in_one_line(command, silent, tmp_path):
    config = str(kubeconfig(tmp_path / "hung.yaml", silent.port))
    args = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    flag = "--bootstrap-kubeconfig" if command.startswith("bootstrap") else "--kubeconfig"
    before = len(silent.held)
    started = time.monotonic()
    result = invoke([*args, flag, config], env={"NODEMANAGER_REQUEST_TIMEOUT": str(LIMIT)})
    took = time.monotonic() - started
    line = one_line_error(result)
    assert str(silent.port) in line and "timed out" in line, line
    # One connection: the timed-out read is not tried again (urllib3 did, 3 more times).
    assert len(silent.held) - before == 1
    # Bounded: one request's limit and the command's own start-up (imports, TLS context;
    # seconds at load 10), where it waited forever before.
    assert took < LIMIT + 30, f"{command} took {took:.1f} s against a {LIMIT} s limit"


def test_the_default_limits_are_bounded():
    from nodemanager.kube.client import timeouts

    connect, read = timeouts()
    assert 0 < connect <= 5 and 0 < read <= 30
