"""This host's WireGuard keypair for ``ManagedNode.spec.wireGuard``: made once, kept for good.

Upstream keeps the private key in a Kubernetes Secret. Here it never leaves the host: it is a
0600 file in a 0700 directory under the state directory, and only the public key is reported.
A key is never replaced: the stored file wins; without one, the private key of a live interface
of that name (``wg show IFACE private-key``) is adopted, so enabling the field on a host that
already runs WireGuard keeps its peers working; then the key upstream kept in its Secret
(``adopt``, read once: from then on the file is the key); only then is a new key generated
with ``wg genkey`` (Debian's wireguard-tools). The key is Curve25519, as WireGuard's.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from nodemanager.fsutil import write_atomic

log = logging.getLogger(__name__)
# A WireGuard key: 32 bytes, base64 (44 characters ending in "=").
_KEY = re.compile(r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$")
_INTERFACE = re.compile(r"^[A-Za-z0-9_=+.-]{1,15}$")  # Linux IFNAMSIZ, wg-quick's rule


class WireGuardKeyError(Exception):
    """The keypair could not be read or made; the message never holds the private key."""


def _wg(*args: str, stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(
            ["wg", *args], input=stdin, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WireGuardKeyError(f"wg {args[0]}: {e} (is wireguard-tools installed?)") from e
    if proc.returncode != 0:
        raise WireGuardKeyError(f"wg {args[0]} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


class KeyStore:
    """Keypairs by interface name under ``<state_dir>/wireguard``; public keys cached in memory."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        adopt: Callable[[str], str | None] | None = None,
    ):
        self.dir = Path(state_dir) / "wireguard"
        self._public: dict[str, str] = {}
        self.adopt = adopt  # interface -> the private key upstream stored, or None

    def path(self, interface: str) -> Path:
        return self.dir / f"{interface}.key"

    def public_key(self, interface: str) -> str:
        """The public key of ``interface``'s keypair, made (or adopted) on first call."""
        if not _INTERFACE.match(interface):
            raise WireGuardKeyError(f"spec.wireGuard.interface: {interface!r} is not a valid name")
        cached = self._public.get(interface)
        if cached and self.path(interface).exists():
            return cached
        private = self._private(interface)
        public = _wg("pubkey", stdin=private + "\n")
        if not _KEY.match(public):
            raise WireGuardKeyError("wg pubkey returned no key")
        self._public[interface] = public
        return public

    def _private(self, interface: str) -> str:
        path = self.path(interface)
        try:
            stored = path.read_text().strip()
        except FileNotFoundError:
            stored = ""
        if stored:
            if not _KEY.match(stored):
                # Never overwrite what may be someone's key: say so and let them decide.
                raise WireGuardKeyError(f"{path} does not hold a WireGuard key; not replacing it")
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            return stored
        private = self._live(interface) or self._adopted(interface) or _wg("genkey")
        if not _KEY.match(private):
            raise WireGuardKeyError("wg genkey returned no key")
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        write_atomic(path, (private + "\n").encode(), mode=0o600)
        return private

    def _adopted(self, interface: str) -> str | None:
        if self.adopt is None:
            return None
        try:
            key = (self.adopt(interface) or "").strip()
        except Exception as e:  # no grant, no API: a new key, and the way to keep the old one
            log.warning(
                "cannot read the key upstream kept for %s (%s); making a new one. To keep the "
                "old one, put its private key in %s (0600) and restart the agent",
                interface,
                e,
                self.path(interface),
            )
            return None
        return key if _KEY.match(key) else None

    @staticmethod
    def _live(interface: str) -> str | None:
        """The private key of a running interface of that name, or None."""
        try:
            key = _wg("show", interface, "private-key")
        except WireGuardKeyError:
            return None
        return key if _KEY.match(key) else None


def with_managed_key(
    observed: list[dict[str, object]], interface: str, public_key: str
) -> list[dict[str, object]]:
    """``status.wireGuard`` with the managed interface in it. A running interface of that name
    reports what the kernel has (its listen port too); one not up yet reports the stored key."""
    if any(i.get("name") == interface for i in observed):
        return observed
    entry: dict[str, object] = {"name": interface, "publicKey": public_key, "listenPort": 0}
    return sorted([*observed, entry], key=lambda i: str(i["name"]))
