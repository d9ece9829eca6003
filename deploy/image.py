"""The controller image: an OCI archive built without a daemon or a base image (umoci).

The root is made here, as the test machines are, from Debian bookworm's own packages: the
packages of its Python 3.11 (PACKAGES) are fetched with `apt-get download` and unpacked with
`dpkg-deb -x`, no maintainer scripts, so the image holds no shell, package manager or
coreutils; of their documentation only the copyright files stay. The agent file goes in as
/usr/local/bin/nodemanager (its LICENSE and THIRD-PARTY-NOTICES in
/usr/local/share/doc/nodemanager) and is unpacked at build time
into /usr/lib/nodemanager (NODEMANAGER_UNPACK_DIR in the image's environment): the read-only
root filesystem of deploy/controller.yaml leaves it nothing to write at run time. The modules
nodemanager imports are compiled then too (a read-only root cannot cache bytecode; without it
the controller compiles the Kubernetes client at every start). Both steps run the image's own
Python in the root (`unshare --map-root-user chroot`: no root needed where user namespaces are).

Two layers: the Python root (changes with Debian's updates) and nodemanager. The image runs as
65532 (nonroot), the user deploy/controller.yaml's securityContext names; its entrypoint is the
agent file under the image's Python, its default arguments those of the Deployment.

Usage: python deploy/image.py AGENT-FILE DIST
(writes DIST/nodemanager-controller-<version>-<arch>.oci.tar; `make image` runs it in a release)
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

NAME = "nodemanager-controller"
PYTHON = "3.11"  # bookworm's; the agent file carries site-cp311 for it
# Python 3.11 and the libraries its modules link against; curses, readline, dbm and nis are left
# out (nodemanager imports none of them). Debian names, resolved by the build host's apt.
PACKAGES = (
    "libc6",
    "libgcc-s1",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libssl3",
    "libbz2-1.0",
    "liblzma5",
    "libsqlite3-0",
    "libuuid1",
    "libcrypt1",
    "media-types",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "python3.11-minimal",
)
USER = 65532
UNPACK_DIR = "/usr/lib/nodemanager"
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # OCI/Debian architecture names
# Imports every nodemanager module once with the image's Python: writes their bytecode (and
# that of every module they import) beside the sources.
WARM_UP = """
import importlib, pkgutil, sys
sys.path[:0] = [sys.argv[1] + "/site-cp%d%d" % sys.version_info[:2], sys.argv[1] + "/site"]
import nodemanager
for module in pkgutil.walk_packages(nodemanager.__path__, "nodemanager."):
    importlib.import_module(module.name)
"""


def tag(version: str) -> str:
    """An OCI tag for a version: a local version's `+` is not allowed in tags."""
    return version.replace("+", "-")


def archive_name(version: str, arch: str = platform.machine()) -> str:
    return f"{NAME}-{tag(version)}-{ARCH.get(arch, arch)}.oci.tar"


def run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv[:3]))} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def in_root(root: Path, *argv: str) -> str:
    """argv run in root by the root's own Python, with nothing of this environment."""
    env = {"PATH": "/usr/bin", "NODEMANAGER_UNPACK_DIR": UNPACK_DIR}
    return run(tool("unshare"), "--map-root-user", tool("chroot"), root, *argv, env=env)


def tool(name: str) -> str:
    """A build tool's path (chroot is in /usr/sbin, off a user's PATH)."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if found is None:
        raise SystemExit(f"{name} not found: `make deps` installs umoci (Debian's)")
    return found


def python_root(root: Path, debs: Path) -> list[tuple[str, str]]:
    """Unpack PACKAGES into root; returns their (name, version), for the SBOM."""
    run("apt-get", "download", "-o", "APT::Sandbox::User=root", *PACKAGES, cwd=debs)
    packages = []
    for deb in sorted(debs.glob("*.deb")):
        run("dpkg-deb", "-x", deb, root)
        name, version = run("dpkg-deb", "-f", deb, "Package", "Version").splitlines()
        packages.append((name.split(": ", 1)[1], version.split(": ", 1)[1]))
    for unused in ("usr/share/man", "usr/share/lintian", "usr/share/binfmts"):
        shutil.rmtree(root / unused, ignore_errors=True)
    # Of the packages' documentation only their copyright files stay: the licenses of what
    # the image redistributes.
    for doc in (root / "usr" / "share" / "doc").glob("*/*"):
        if doc.name != "copyright":
            shutil.rmtree(doc) if doc.is_dir() and not doc.is_symlink() else doc.unlink()
    (root / "usr" / "bin" / "python3").symlink_to(f"python{PYTHON}")
    (root / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"nonroot:x:{USER}:{USER}:nonroot:/nonexistent:/usr/sbin/nologin\n"
    )
    (root / "etc" / "group").write_text(f"root:x:0:\nnonroot:x:{USER}:\n")
    (root / "tmp").mkdir(mode=0o1777)  # read-only in the Deployment: a mount point
    (root / "tmp").chmod(0o1777)
    return packages


def add_nodemanager(root: Path, agent: Path) -> None:
    """The agent file, unpacked and compiled in place for the image's Python only."""
    target = root / "usr" / "local" / "bin" / "nodemanager"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(agent, target)
    in_root(root, f"/usr/bin/python{PYTHON}", "/usr/local/bin/nodemanager", "--version")
    # Unpacked, the file's entry point alone finds the payload: the zip (40 MB) can go.
    with zipfile.ZipFile(agent) as zipapp:
        target.write_bytes(f"#!/usr/bin/python{PYTHON}\n".encode() + zipapp.read("__main__.py"))
        doc = root / "usr" / "local" / "share" / "doc" / "nodemanager"
        doc.mkdir(parents=True)
        for name in ("LICENSE", "THIRD-PARTY-NOTICES"):  # the zip's, which the image drops
            (doc / name).write_bytes(zipapp.read(name))
    target.chmod(0o755)
    (app,) = (root / UNPACK_DIR.lstrip("/")).glob("app-*")
    for other in app.glob("site-cp*"):
        if other.name != "site-cp" + PYTHON.replace(".", ""):
            shutil.rmtree(other)
    in_root(root, f"/usr/bin/python{PYTHON}", "-c", WARM_UP, f"/{app.relative_to(root)}")


def readable(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """umoci writes its blobs 0600: readable by whoever loads the archive, owned by no one."""
    member.mode = 0o755 if member.isdir() else 0o644
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def build(agent: Path, dist: Path, version: str) -> tuple[Path, list[tuple[str, str]]]:
    """dist/<archive_name> from the agent file; returns it and the Debian packages it holds."""
    for name in ("umoci", "apt-get", "dpkg-deb", "unshare", "chroot"):
        tool(name)
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    with tempfile.TemporaryDirectory(prefix="nodemanager-image-") as tmp:
        base, app, debs, layout = (Path(tmp) / d for d in ("base", "app", "debs", "layout"))
        for d in (base, debs):
            d.mkdir()
        packages = python_root(base, debs)
        add_nodemanager(base, agent)
        # nodemanager in a layer of its own: an upgrade leaves the Python layer as it was
        for part in ("usr/local", UNPACK_DIR.lstrip("/")):
            (app / part).parent.mkdir(parents=True, exist_ok=True)
            (base / part).rename(app / part)
        image = f"{layout}:{tag(version)}"
        run("umoci", "init", "--layout", layout)
        run("umoci", "new", "--image", image)
        run("umoci", "insert", *rootless, "--image", image, base, "/")
        run("umoci", "insert", *rootless, "--image", image, app / "usr", "/usr")
        run(
            "umoci",
            "config",
            "--image",
            image,
            "--architecture",
            ARCH.get(platform.machine(), platform.machine()),
            "--os",
            "linux",
            "--config.user",
            f"{USER}:{USER}",
            "--config.workingdir",
            "/",
            "--config.env",
            "PATH=/usr/local/bin:/usr/bin",
            "--config.env",
            f"NODEMANAGER_UNPACK_DIR={UNPACK_DIR}",
            *("--config.entrypoint", f"/usr/bin/python{PYTHON}"),
            *("--config.entrypoint", "/usr/local/bin/nodemanager"),
            *("--config.cmd", "controller"),
            *("--config.label", f"org.opencontainers.image.version={version}"),
            *("--config.label", "org.opencontainers.image.title=nodemanager controller"),
        )
        run("umoci", "gc", "--layout", layout)
        out = dist / archive_name(version)
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as archive:  # an oci-archive is the layout, tarred
            for entry in sorted(layout.iterdir()):
                archive.add(entry, arcname=entry.name, filter=readable)
        partial.rename(out)
    return out, packages


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python deploy/image.py AGENT-FILE DIST")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nodemanager.version import build_info

    path, _ = build(Path(sys.argv[1]), Path(sys.argv[2]), build_info().version)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
