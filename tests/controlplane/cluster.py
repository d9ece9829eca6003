"""A real control plane on loopback: etcd + kube-apiserver with RBAC and service-account tokens.

Like controller-runtime's envtest: no scheduler, and no controller-manager unless a test asks
for CertificateSigningRequests to be signed (``start_controller_manager``: only the csrsigning
and csrcleaner controllers, signing with the cluster CA). Certificates come from the openssl CLI:
a CA, a serving certificate for 127.0.0.1, an admin client certificate in system:masters, and a
service-account signing key so the TokenRequest API works.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import yaml

from tests.controlplane.build import build, check_etcd, controller_manager

ISSUER = "https://kubernetes.default.svc"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class ControlPlane:
    def __init__(self, data_dir: str | os.PathLike | None = None):
        self.dir = Path(data_dir or tempfile.mkdtemp(prefix="nodemanager-cp-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pki = self.dir / "pki"
        self.etcd_port, self.peer_port, self.port = free_port(), free_port(), free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.ca = self.pki / "ca.crt"
        self._etcd: subprocess.Popen | None = None
        self._apiserver: subprocess.Popen | None = None
        self._controller_manager: subprocess.Popen | None = None

    # -- certificates ----------------------------------------------------------------------

    def _extensions(self) -> Path:
        """The X.509 v3 extensions of the test PKI, made as a real CA makes them (RFC 5280):
        CPython 3.13's default context verifies with VERIFY_X509_STRICT, which rejects a CA
        without a critical keyUsage of keyCertSign, and a certificate without an authority key
        identifier; kubectl and Go accept both, so only the agent under 3.13 would notice."""
        path = self.pki / "extensions.cnf"
        path.write_text(
            "[req]\ndistinguished_name = dn\n[dn]\n"
            "[ca]\n"
            "basicConstraints = critical, CA:TRUE\n"
            "keyUsage = critical, keyCertSign, cRLSign\n"
            "subjectKeyIdentifier = hash\n"
            "authorityKeyIdentifier = keyid:always\n"
            "[serving]\n"
            "basicConstraints = critical, CA:FALSE\n"
            "keyUsage = critical, digitalSignature, keyEncipherment\n"
            "extendedKeyUsage = serverAuth\n"
            "subjectKeyIdentifier = hash\n"
            "authorityKeyIdentifier = keyid:always\n"
            "subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:kubernetes.default.svc\n"
            "[client]\n"
            "basicConstraints = critical, CA:FALSE\n"
            "keyUsage = critical, digitalSignature, keyEncipherment\n"
            "extendedKeyUsage = clientAuth\n"
            "subjectKeyIdentifier = hash\n"
            "authorityKeyIdentifier = keyid:always\n"
        )
        return path

    def _pki(self) -> None:
        self.pki.mkdir(exist_ok=True)
        p = self.pki
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "30",
            "-subj",
            "/CN=nodemanager-test-ca",
            "-config",
            str(self._extensions()),
            "-extensions",
            "ca",
            cwd=p,
        )
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "serving.key",
            "-out",
            "serving.csr",
            "-subj",
            "/CN=kube-apiserver",
            cwd=p,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            "serving.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "serving.crt",
            "-days",
            "30",
            "-extfile",
            "extensions.cnf",
            "-extensions",
            "serving",
            cwd=p,
        )
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=p)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=p)
        self.client_cert("admin", ["system:masters"])

    def client_cert(self, user: str, groups: list[str] = ()) -> tuple[Path, Path]:
        """A client certificate for ``user`` in ``groups``, signed by the test CA."""
        subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
        key, csr, crt = (self.pki / f"{user}.{ext}" for ext in ("key", "csr", "crt"))
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            subject,
            cwd=self.pki,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            str(crt),
            "-days",
            "30",
            "-extfile",
            "extensions.cnf",
            "-extensions",
            "client",
            cwd=self.pki,
        )
        return crt, key

    def user_kubeconfig(self, user: str, groups: list[str] = (), path: Path | None = None) -> Path:
        """A kubeconfig authenticating as ``user`` (client certificate) for RBAC tests."""
        crt, key = self.client_cert(user, groups)
        path = path or self.dir / f"{user}.kubeconfig"
        self._write_kubeconfig(path, user, {"client-certificate": str(crt), "client-key": str(key)})
        return path

    def _write_kubeconfig(self, path: Path, user: str, credentials: dict) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": user,
            "clusters": [
                {
                    "name": "nodemanager-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca)},
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": user, "context": {"cluster": "nodemanager-test", "user": user}}],
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    # -- processes -------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "ab") as log:  # the child keeps its own descriptor
            return subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _start_apiserver(self) -> None:
        p = self.pki
        self._apiserver = self._spawn(
            "kube-apiserver",
            [
                str(build()),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--advertise-address=127.0.0.1",
                f"--tls-cert-file={p / 'serving.crt'}",
                f"--tls-private-key-file={p / 'serving.key'}",
                f"--client-ca-file={self.ca}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={ISSUER}",
                f"--api-audiences={ISSUER}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                # No controller-manager runs: service account tokens come from TokenRequest only.
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                f"--cert-dir={self.dir / 'certs'}",
            ],
        )
        self._wait_ready()

    def start_controller_manager(self) -> None:
        """kube-controller-manager signing CSRs with the cluster CA once they are approved
        (kubernetes.io/kube-apiserver-client and the kubelet signers). It approves nothing
        itself: no approver controller runs. Serves nothing (--secure-port=0)."""
        if self._controller_manager is not None and self._controller_manager.poll() is None:
            return
        p = self.pki
        self._controller_manager = self._spawn(
            "kube-controller-manager",
            [
                str(controller_manager()),
                f"--kubeconfig={self.kubeconfig}",
                "--controllers=csrsigning,csrcleaner",
                f"--cluster-signing-cert-file={self.ca}",
                f"--cluster-signing-key-file={p / 'ca.key'}",
                "--leader-elect=false",
                "--secure-port=0",
                "--profiling=false",
            ],
        )

    def stop_controller_manager(self) -> None:
        self._kill(self._controller_manager)

    def start(self) -> ControlPlane:
        check_etcd()
        build()
        if not self.ca.exists():
            self._pki()
        self._write_kubeconfig(
            self.kubeconfig,
            "admin",
            {
                "client-certificate": str(self.pki / "admin.crt"),
                "client-key": str(self.pki / "admin.key"),
            },
        )
        self._etcd = self._spawn(
            "etcd",
            [
                check_etcd(),
                f"--data-dir={self.dir / 'etcd'}",
                "--name=default",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{self.peer_port}",
                "--quota-backend-bytes=1073741824",
                "--log-level=warn",
            ],
        )
        self._start_apiserver()
        return self

    def _wait_ready(self, timeout: float = 90) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._apiserver.poll() is not None:
                break
            try:
                with urllib.request.urlopen(
                    f"{self.server}/readyz", context=context, timeout=2
                ) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        tail = (self.dir / "kube-apiserver.log").read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(
            f"kube-apiserver did not become ready within {timeout:.0f} s; log tail:\n{tail}"
        )

    @staticmethod
    def _kill(proc: subprocess.Popen | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop_apiserver(self) -> None:
        self._kill(self._apiserver)

    @contextlib.contextmanager
    def hung_apiserver(self) -> Iterator[None]:
        """kube-apiserver stopped by SIGSTOP: connections open, no answers (hung, not down)."""
        assert self._apiserver is not None
        os.kill(self._apiserver.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self._apiserver.pid, signal.SIGCONT)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver only: same ports, certificates and etcd data."""
        self.stop_apiserver()
        self._start_apiserver()

    def stop(self) -> None:
        self._kill(self._controller_manager)
        self._kill(self._apiserver)
        self._kill(self._etcd)
