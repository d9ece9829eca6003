"""The release the artifact tests share: built once per source hash, cached on disk.

`release()` runs deploy/release.py (as `make release` does, for this machine's glibc target and
one cross-built target) into ~/.cache/nodemanager/artifacts/<key>/ and returns that directory.
The key is the build's version line from git (the artifacts carry the commit) and a hash of
every input file's path and content (a dirty tree builds anew), so every test of one commit,
in every suite of a run (tests/parallel.py runs two at once), reuses one build: the first takes
an exclusive lock and builds into a staging directory that is renamed into place, the others
wait on the lock and read the result.

The cached files are shared: a test copies what it writes next to (an agent file unpacks beside
itself in tests/e2e) and never changes them in place. Old entries are pruned, never one used in
the last hour (another checkout's run may be reading it).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nodemanager.version import from_git

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager"
ARTIFACTS = CACHE / "artifacts"
# What the artifacts are built from (README.md is the sdist's long description).
INPUTS = (
    "nodemanager",
    "deploy",
    "playbook_templates",
    "collections/ansible_collections",
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
)
SKIPPED = ("__pycache__", ".pyc", "_build.json", ".egg-info")
ARCH = platform.machine()
OTHER = "aarch64" if ARCH == "x86_64" else "x86_64"
# This machine's file (it runs here) and one cross-built for the other libc and architecture.
TARGETS = (f"{ARCH}-gnu", f"{OTHER}-musl")
# A release names its maintainer and home page (deploy/publisher.py); the tests' are marked as
# such (example.org passes only with NODEMANAGER_TEST_RELEASE).
PUBLISHER = {
    "NODEMANAGER_MAINTAINER": "nodemanager tests <tests@nodemanager.example.org>",
    "NODEMANAGER_URL": "https://nodemanager.example.org/",
    "NODEMANAGER_TEST_RELEASE": "1",
}
KEEP, IN_USE = 4, 3600.0  # entries kept; seconds an entry counts as in use after its last use


def source_key() -> str:
    """Version line from git + a hash of the inputs' paths and contents (+ the build Python)."""
    info = from_git(ROOT)
    digest = hashlib.sha256(f"{info}\0{sys.version}\0{TARGETS}".encode())
    for entry in INPUTS:
        top = ROOT / entry
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            if not any(skip in path.name or skip in path.parts for skip in SKIPPED):
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def release() -> Path:
    """The cached dist/ of this source tree (built first if needed): the sdist, the wheel, the
    agent files of TARGETS, the .deb, the controller image, the SBOM and SHA256SUMS."""
    target = ARTIFACTS / source_key()
    if (target / "SHA256SUMS").exists():  # renamed into place complete: no need to wait for
        os.utime(target)  # the lock another checkout's build holds
        return target
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "SHA256SUMS").exists():
            _build(target)
            _prune(keep=target)
        os.utime(target)  # last use, for pruning
    return target


def agent_file() -> Path:
    """This machine's agent file from the cached release (read it or copy it; never write)."""
    return next(release().glob(f"nodemanager-*-linux-{ARCH}"))


def image() -> Path:
    """The controller image (an OCI archive) from the cached release."""
    return next(release().glob("nodemanager-controller-*.oci.tar"))


def _build(target: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=ARTIFACTS))
    staging.chmod(0o755)  # readable as the tests' other users (the image runs as non-root)
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(ROOT / "deploy" / "release.py"), str(staging), *TARGETS],
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, **PUBLISHER},
        )
        if done.returncode != 0:
            raise RuntimeError(f"deploy/release.py failed:\n{done.stdout[-3000:]}{done.stderr}")
        seconds = ARTIFACTS / f".{target.name}.seconds"  # beside it: dist/ lists only artifacts
        seconds.write_text(f"{time.monotonic() - started:.1f}\n")
        staging.rename(target)  # atomic: a half-built release is never taken for a cached one
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _prune(keep: Path) -> None:
    entries = sorted(
        (p for p in ARTIFACTS.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in entries[KEEP:]:
        if old != keep and time.time() - old.stat().st_mtime > IN_USE:
            shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    print(release())
