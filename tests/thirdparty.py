"""Build the real third-party programs the tests compare against, and cache them.

Alpine's apk, FreeBSD's pkg and upstream's Go agent are in no package this machine reaches, but
their sources sit in ``../shared/vendor`` (or ``$NODEMANAGER_VENDOR``). Each is built once into
``~/.cache/nodemanager/<name>-<digest>/``, keyed by the digest of its archive in the vendor
directory's SHA256SUMS, under a lock so that concurrent test sessions wait for one build. Where
the vendor directory or an archive is missing, :func:`missing` says so in one line, which the
tests use as their skip reason.

``python -m tests.thirdparty build`` builds all three at once (``make test``'s set-up runs it
beside the kube-apiserver build).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.build import CACHE

ROOT = Path(__file__).resolve().parents[1]
VENDOR = Path(os.environ.get("NODEMANAGER_VENDOR", ROOT.parent / "shared" / "vendor"))


@dataclass(frozen=True)
class Program:
    name: str
    archive: str
    binary: str  # path of the program inside its cache directory

    def digest(self) -> str | None:
        sums = VENDOR / "SHA256SUMS"
        if not sums.exists():
            return None
        for line in sums.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == self.archive:
                return parts[0]
        return None

    def prefix(self) -> Path:
        return CACHE / f"{self.name}-{(self.digest() or 'unknown')[:16]}"

    def path(self) -> Path:
        return self.prefix() / self.binary


APK = Program("apk", "apk-tools-2.14.9.tar.gz", "sbin/apk")
PKG = Program("pkg", "pkg-2.8.4.tar.gz", "sbin/pkg")
UPSTREAM = Program(
    "nodemanager-upstream", "nodemanager-upstream-bfdb317.tar.gz", "bin/nodemanager-upstream"
)
PROGRAMS = (APK, PKG, UPSTREAM)


def missing(program: Program) -> str | None:
    """Why ``program`` cannot be had here, in one line; None when it can."""
    if not (VENDOR / program.archive).exists() or program.digest() is None:
        return f"{program.name}: {VENDOR / program.archive} (with its SHA256SUMS line) is absent"
    if program.path().exists():
        return None
    tools = ["go"] if program is UPSTREAM else ["cc", "make"]
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if absent:
        return f"{program.name}: needs {', '.join(absent)} to build from {program.archive}"
    return None


def build(program: Program) -> Path:
    """The cached program, built first if missing (raises RuntimeError with the build's tail)."""
    reason = missing(program)
    if reason:
        raise RuntimeError(reason)
    target = program.path()
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"build-{program.prefix().name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            started = time.monotonic()
            _BUILDERS[program.name](program)
            print(f"built {program.name} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


def _run(command: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("ab") as out:
        proc = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed in {cwd}:\n{tail}")


def _unpack(archive: str, into: Path) -> Path:
    with tarfile.open(VENDOR / archive) as tar:
        tar.extractall(into, filter="tar")
    return into / archive.removesuffix(".tar.gz")


def _install(staged: Path, program: Program) -> None:
    """Move a finished build into place with one rename: a half-built cache never exists."""
    final = program.prefix()
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staged, final)


def _build_apk(program: Program) -> None:
    with tempfile.TemporaryDirectory(prefix="apk-build-", dir=CACHE) as tmp:
        src = _unpack(program.archive, Path(tmp))
        _run(["make", "-j2", "LUA=no", "static"], src, Path(tmp) / "build.log")
        staged = Path(tmp) / "out"
        (staged / "sbin").mkdir(parents=True)
        shutil.copy2(src / "src" / "apk.static", staged / "sbin" / "apk")
        _install(staged, program)


def _build_pkg(program: Program) -> None:
    with tempfile.TemporaryDirectory(prefix="pkg-build-", dir=CACHE) as tmp:
        src = _unpack(program.archive, Path(tmp))
        # the prefix is compiled in (libpkg's paths), so configure for the final directory and
        # install into a staging copy of it
        final = program.prefix()
        log = Path(tmp) / "build.log"
        _run(["./configure", f"--prefix={final}"], src, log)
        _run(["make", "-j2"], src, log)
        staged = Path(tmp) / "out"
        _run(["make", "install", f"DESTDIR={staged}"], src, log)
        _install(staged / final.relative_to("/"), program)


def _build_upstream(program: Program) -> None:
    with tempfile.TemporaryDirectory(prefix="upstream-build-", dir=CACHE) as tmp:
        src = _unpack(program.archive, Path(tmp))
        staged = Path(tmp) / "out"
        env = {**os.environ, "GOFLAGS": "-mod=vendor", "CGO_ENABLED": "0"}
        command = ["go", "build", "-trimpath", "-ldflags", "-s -w"]
        command += ["-o", str(staged / program.binary), "./cmd/"]
        _run(command, src, Path(tmp) / "build.log", env=env)
        _install(staged, program)


_BUILDERS = {APK.name: _build_apk, PKG.name: _build_pkg, UPSTREAM.name: _build_upstream}


def build_all() -> int:
    """Build every program whose sources are here, at once; one line for each skipped."""
    wanted = []
    for program in PROGRAMS:
        reason = missing(program)
        if reason:
            print(f"skipped {reason}", file=sys.stderr)
        else:
            wanted.append(program)
    with ThreadPoolExecutor(len(PROGRAMS)) as pool:
        futures = {program.name: pool.submit(build, program) for program in wanted}
    failed = 0
    for name, future in futures.items():
        error = future.exception()
        if error:
            failed += 1
            print(f"{name}: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.thirdparty build")
    sys.exit(build_all())
