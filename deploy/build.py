"""`make build`: bin/nodemanager, one runnable file that carries its Python dependencies.

The file is a zipapp (PEP 441) holding nodemanager with every dependency (pip install --target),
the playbook skeletons and the Ansible collections, with LICENSE and THIRD-PARTY-NOTICES (every
bundled package's and collection's license, deploy/licenses.py) at its top. Compiled
dependencies (PyYAML, MarkupSafe, cryptography) cannot be imported from a zip, so on first start
the payload is unpacked once, atomically, into a directory keyed by the payload's hash and the
Python minor; later starts only check that it is there. Each running agent holds a shared lock on
its tree; a start removes the other trees no process holds, so an upgrade leaves one tree
behind, not one per payload.
ansible-runner starts `ansible-playbook` as a process: the unpacked tree has a small
`bin/ansible-playbook` written for the interpreter that runs the zipapp.

One file runs on every CPython in PYTHONS (the minors ansible-core 2.19 supports) of one
platform in TARGETS: nodemanager's wheel and its dependencies are installed as binary wheels for
that platform once per minor (pip --platform --python-version --only-binary, so a build for
aarch64 or musl needs no such machine); what is identical under every minor (pure Python, abi3
modules such as cryptography's) is carried once in `site/`, the rest (PyYAML, MarkupSafe, cffi,
… with `*.cpython-3XX-*.so`) per minor in `site-cp3XX/`. On another interpreter or platform the
file says in one line what it needs and exits 2.

Usage: python deploy/build.py OUT [ARCH LIBC]  (default: this machine's, e.g. x86_64 gnu).
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import zipapp
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nodemanager.version import stamp  # noqa: E402  (the checkout's, standard library only)

import licenses  # noqa: E402  (deploy/licenses.py: this directory is on sys.path when run)

# The zipapp's entry point. It must only use the standard library: nothing else is importable
# before the payload is unpacked.
BOOT = r"""
import os, sys, tempfile, zipfile
from pathlib import Path

PAYLOAD_HASH = {payload_hash!r}
PYTHONS = {pythons!r}
MULTIARCH = {multiarch!r}

if sys.implementation.name != "cpython" or sys.version_info[:2] not in PYTHONS:
    sys.stderr.write(
        "nodemanager: needs CPython "
        + ", ".join("%d.%d" % v for v in PYTHONS)
        + "; this is %s %d.%d (%s)\n"
        % ((sys.implementation.name,) + sys.version_info[:2] + (sys.executable,))
    )
    sys.exit(2)
if getattr(sys.implementation, "_multiarch", MULTIARCH) != MULTIARCH:
    sys.stderr.write(
        "nodemanager: this file is for %s; this Python is %s: use that platform's file\n"
        % (MULTIARCH, sys.implementation._multiarch)
    )
    sys.exit(2)
SITES = ["site-cp%d%d" % sys.version_info[:2], "site"]


def _cache_root():
    explicit = os.environ.get("NODEMANAGER_UNPACK_DIR")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/cache/nodemanager")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager"


# A shared lock on the tree for this process's life: a newer payload's start removes only
# trees nobody holds (fcntl locks end with the process, however it ends).
def _hold(target):
    import fcntl
    holder = open(target / ".complete", "rb")
    fcntl.flock(holder, fcntl.LOCK_SH)
    return holder


# Every other unpacked tree (another payload, another Python minor) that no running process
# holds: each payload left ~200 MB behind that nothing removed.
def _remove_unused(keep):
    import fcntl, shutil
    for old in keep.parent.glob("app-*"):
        if old == keep or old.name.startswith("."):
            continue
        try:
            with open(old / ".complete", "rb") as probe:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                doomed = old.with_name(".remove-" + old.name)
                os.rename(old, doomed)  # gone at once for a concurrent start, then removed
        except OSError:
            continue  # in use, half removed by another start, or not ours to judge
        shutil.rmtree(doomed, ignore_errors=True)
    for doomed in keep.parent.glob(".remove-app-*"):  # what an interrupted removal left
        shutil.rmtree(doomed, ignore_errors=True)


def _unpack():
    # Keyed by payload and Python minor: the ansible-playbook shim names this interpreter, and
    # a Python upgraded in place to a new minor must not run the old minor's modules.
    target = _cache_root() / ("app-%s-cp%d%d" % ((PAYLOAD_HASH[:16],) + sys.version_info[:2]))
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    with zipfile.ZipFile(os.path.dirname(__file__)) as archive:
        for member in archive.namelist():
            if member.startswith("payload/"):
                archive.extract(member, staging)
    shim = staging / "payload" / "bin" / "ansible-playbook"
    shim.parent.mkdir()
    shim.write_text(
        "#!"
        + sys.executable
        + "\nimport sys\nsys.path[:0] = "
        + repr([str(target / site) for site in SITES])
        + "\n"
        "from ansible.cli.playbook import main\nsys.exit(main())\n")
    shim.chmod(0o755)
    (staging / "payload" / ".complete").touch()
    try:
        os.rename(staging / "payload", target)  # atomic: a concurrent start sees all or nothing
    except OSError:
        if not (target / ".complete").exists():
            raise
    finally:
        import shutil
        shutil.rmtree(staging, ignore_errors=True)
    return target


app = _unpack()
_held = _hold(app)
_remove_unused(app)
sys.path[:0] = [str(app / site) for site in SITES]
os.environ.setdefault("NODEMANAGER_COLLECTIONS_PATH", str(app / "collections"))
os.environ.setdefault("NODEMANAGER_PLAYBOOK_TEMPLATES", str(app / "playbook_templates"))
os.environ.setdefault("NODEMANAGER_ANSIBLE_BIN", str(app / "bin"))
from nodemanager.cli import main
sys.exit(main())
"""


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    if root.is_file():
        return hashlib.sha256(root.read_bytes()).hexdigest()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# The CPython minors one file serves (ansible-core 2.19: 3.11 to 3.13).
PYTHONS = ((3, 11), (3, 12), (3, 13))
# The platforms an agent file is built for: (architecture, libc) as in sys.implementation's
# _multiarch, `<arch>-linux-<libc>`, which the file checks at start.
TARGETS = (("x86_64", "gnu"), ("aarch64", "gnu"), ("x86_64", "musl"), ("aarch64", "musl"))
HOST = (platform.machine(), "musl" if "musl" in platform.libc_ver()[0] else "gnu")


def pip_platforms(arch: str, libc: str) -> list[str]:
    """pip --platform tags of a target: every manylinux (glibc 2.17+) or musllinux tag."""
    if libc == "musl":
        return [f"musllinux_1_{minor}_{arch}" for minor in (1, 2)]
    return [f"manylinux_2_{minor}_{arch}" for minor in range(17, 40)] + [f"manylinux2014_{arch}"]


def install_sites(wheel: Path, payload: Path, arch: str, libc: str) -> None:
    """nodemanager's wheel with every dependency as binary wheels for the target, once per
    CPython minor; then each top-level entry identical under every minor moves to site/, the
    rest stays in site-cp3XX/ (whole packages: a package split across two sys.path entries
    would not import)."""
    platforms = [arg for tag in pip_platforms(arch, libc) for arg in ("--platform", tag)]
    sites = [payload / f"site-cp{major}{minor}" for major, minor in PYTHONS]
    for (major, minor), site in zip(PYTHONS, sites, strict=True):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
            + ["--only-binary=:all:", "--implementation", "cp"]
            + ["--python-version", f"{major}.{minor}", *platforms]
            + ["--target", str(site), str(wheel)],
            check=True,
        )
        shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: not for the target
    shared = payload / "site"
    shared.mkdir()
    for entry in sorted(p.name for p in sites[0].iterdir()):
        hashes = {tree_hash(site / entry) if (site / entry).exists() else "" for site in sites}
        if len(hashes) == 1:
            (sites[0] / entry).rename(shared / entry)
            for site in sites[1:]:
                shutil.rmtree(site / entry) if (site / entry).is_dir() else (site / entry).unlink()


def build(out: Path, arch: str = HOST[0], libc: str = HOST[1]) -> None:
    collections = ROOT / "collections" / "ansible_collections"
    if not (collections / "community" / "general").is_dir():
        raise SystemExit("collections are not installed: run `make collections` first")
    with tempfile.TemporaryDirectory(prefix="nodemanager-build-") as tmp:
        app = Path(tmp) / "app"
        payload = app / "payload"
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
            + ["--wheel-dir", tmp, str(ROOT)],
            check=True,
        )
        install_sites(next(Path(tmp).glob("nodemanager-*.whl")), payload, arch, libc)
        info = stamp(payload / "site" / "nodemanager", ROOT)
        shutil.copytree(
            collections,
            payload / "collections" / "ansible_collections",
            ignore=shutil.ignore_patterns("__pycache__", "tests", "docs"),
        )
        shutil.copytree(ROOT / "playbook_templates", payload / "playbook_templates")
        # Beside __main__.py, at the zip's top (`unzip -p FILE LICENSE`): nodemanager's license
        # and the notices of everything the payload bundles, read from the payload itself.
        bundled = licenses.Files.of_dir(payload)
        shutil.copyfile(ROOT / "LICENSE", app / "LICENSE")
        notices = licenses.notices(licenses.components(bundled), bundled)
        (app / "THIRD-PARTY-NOTICES").write_text(notices)
        (app / "__main__.py").write_text(
            BOOT.format(
                payload_hash=tree_hash(payload), pythons=PYTHONS, multiarch=f"{arch}-linux-{libc}"
            )
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        zipapp.create_archive(app, partial, interpreter="/usr/bin/env python3", compressed=True)
        partial.chmod(0o755)
        partial.rename(out)
    print(f"built {out} ({out.stat().st_size / 1e6:.1f} MB): {info.line()}")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bin" / "nodemanager", *sys.argv[2:])
