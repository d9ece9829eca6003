"""SSH host key fingerprints as SSHFP records (RFC 4255, 6594, 7479, 8709), like `ssh-keygen -r`."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

ALGORITHMS = {
    "ssh-rsa": 1,
    "ssh-dss": 2,
    "ecdsa-sha2-nistp256": 3,
    "ecdsa-sha2-nistp384": 3,
    "ecdsa-sha2-nistp521": 3,
    "ssh-ed25519": 4,
    "ssh-ed448": 6,
}


def sshfp(public_key_line: str) -> list[dict[str, Any]]:
    """SHA-1 and SHA-256 SSHFP entries of one public key line (``type base64 [comment]``)."""
    kind, blob = public_key_line.split()[:2]
    if kind not in ALGORITHMS:
        return []
    raw = base64.b64decode(blob)
    return [
        {"algorithm": ALGORITHMS[kind], "fingerprintType": t, "fingerprint": h(raw).hexdigest()}
        for t, h in ((1, hashlib.sha1), (2, hashlib.sha256))
    ]


def ssh_host_keys(directory: str = "/etc/ssh") -> list[dict[str, Any]]:
    entries = []
    for path in sorted(Path(directory).glob("ssh_host_*_key.pub")):
        entries.extend(sshfp(path.read_text()))
    return sorted(entries, key=lambda e: (e["algorithm"], e["fingerprintType"], e["fingerprint"]))
