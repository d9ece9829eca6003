"""Kubernetes client errors by class: temporary ones are retried, permanent ones reported; a
certificate the client refused is named as such (a real TLS handshake on 127.0.0.1)."""

import contextlib
import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
import yaml
from click.testing import CliRunner
from kubernetes.client.exceptions import ApiException

from nodemanager.cli import main
from nodemanager.kube.errors import KUBE_ERRORS, Forbidden, Permanent, Temporary, translate


def api_error(status, message="", reason=""):
    e = ApiException(status=status, reason="Reason")
    e.body = json.dumps({"message": message, "reason": reason})
    return e


@pytest.mark.parametrize("status", [408, 409, 410, 429, 500, 503])
def test_retryable_statuses_are_temporary(status):
    error = translate(api_error(status, "try again"))
    assert isinstance(error, Temporary) and error.temporary and error.status == status


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_permanent_with_the_servers_words(status):
    error = translate(api_error(status, "managednodes is forbidden", "Forbidden"))
    assert isinstance(error, Permanent) and not error.temporary
    assert str(error) == f"{status} managednodes is forbidden" and error.reason == "Forbidden"
    assert isinstance(error, Forbidden) == (status == 403)


def test_no_answer_is_temporary_and_caught_by_name():
    e = urllib3.exceptions.MaxRetryError(None, "/api", "connection refused")
    assert isinstance(e, KUBE_ERRORS)
    error = translate(e)
    assert isinstance(error, Temporary) and error.status == 0 and "unreachable" in str(error)


def test_a_non_json_body_is_cut_short():
    e = ApiException(status=502, reason="Bad Gateway")
    e.body = "<html>" + "x" * 1000
    assert len(str(translate(e))) < 260


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A CA made as real ones are (keyUsage critical keyCertSign, CA:TRUE, SKI)."""
    key, crt = directory / f"{name}.key", directory / f"{name}.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
        + ["-keyout", str(key), "-out", str(crt), "-subj", f"/CN={name}"]
        + ["-addext", "basicConstraints=critical,CA:TRUE"]
        + ["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        check=True,
        capture_output=True,
    )
    return crt, key


@pytest.fixture
def tls_server(tmp_path) -> Iterator[tuple[int, Path]]:
    """A TLS listener on 127.0.0.1 whose certificate another CA signed than the one returned:
    the handshake is what fails, as with a kubeconfig naming the wrong CA."""
    signer, signer_key = _ca(tmp_path, "server-ca")
    other, _ = _ca(tmp_path, "other-ca")
    key, csr, crt = (tmp_path / f"server.{ext}" for ext in ("key", "csr", "crt"))
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr)]
        + ["-subj", "/CN=127.0.0.1"],
        check=True,
        capture_output=True,
    )
    (tmp_path / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(signer), "-CAkey"]
        + [str(signer_key), "-CAcreateserial", "-out", str(crt), "-days", "2"]
        + ["-extfile", str(tmp_path / "san.cnf")],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(crt, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):
                context.wrap_socket(conn, server_side=True)  # the client refuses: an OSError

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], other
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_a_refused_certificate_is_said_as_such_not_as_unreachable(tls_server, tmp_path):
    port, wrong_ca = tls_server
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "k",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "certificate-authority": str(wrong_ca),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(
        main, ["--kubeconfig", str(path), "rollout", "status", "configset/x", "--watch=false"]
    )
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert line.startswith("Error: certificate rejected: unable to get local issuer certificate")
    assert f"(https://127.0.0.1:{port})" in line and "unreachable" not in line, line
    assert "certificate-authority" in line and "\n" not in line
