"""Build kube-apiserver and kube-controller-manager from the k8s.io/kubernetes Go module and
cache the binaries.

No Debian package ships them, so they are built from source at a pinned release. The
k8s.io/kubernetes module refers to its staging modules (k8s.io/api, k8s.io/apiserver, ...) as
v0.0.0 with replace lines to local directories that a module download does not carry; a wrapper
module pins each of them to the matching v0.x release instead. Each binary lands under
~/.cache/nodemanager/<component>-<version>-<recipe>/ and is reused by every later run: the
directory is keyed by a digest of the link flags too, so a change to the recipe (such as the
version stamp `kubectl version` reads) rebuilds once, and a lock makes concurrent callers wait
for that one build instead of starting their own. The components missing from the cache are
built by one `go build`, so the packages they share (most of client-go, apiserver, apimachinery)
are compiled once.

kube-controller-manager is only needed by the tests that sign CertificateSigningRequests; the
control plane fixture builds it on demand, `make controlplane` builds both.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KUBERNETES_VERSION = os.environ.get("NODEMANAGER_KUBERNETES_VERSION", "v1.34.4")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager"
ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def ldflags(version: str = KUBERNETES_VERSION) -> str:
    """Strip symbols, and stamp the release the way Kubernetes' own build does
    (hack/lib/version.sh): without it the server reports v0.0.0-master and `kubectl version`
    exits non-zero."""
    major, minor = version.removeprefix("v").split(".")[:2]
    stamp = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in stamp.items()]
    return " ".join(flags)


APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
COMPONENTS = (APISERVER, CONTROLLER_MANAGER)


def _recipe(version: str) -> str:
    return hashlib.sha256(ldflags(version).encode()).hexdigest()[:8]


def binary_path(component: str, version: str = KUBERNETES_VERSION) -> Path:
    return CACHE / f"{component}-{version}-{_recipe(version)}" / component


def apiserver_path(version: str = KUBERNETES_VERSION) -> Path:
    return binary_path(APISERVER, version)


def staging_version(version: str) -> str:
    """k8s.io/kubernetes v1.34.4 pairs with staging modules at v0.34.4."""
    return "v0." + version.removeprefix("v1.")


def _go(*args: str, cwd: Path, env: dict) -> str:
    proc = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


def wrapper_gomod(version: str, upstream_gomod: str) -> str:
    """go.mod text of the wrapper: require kubernetes, replace each v0.0.0 k8s.io/* module."""
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/[\w./-]+) v0\.0\.0\s*$", upstream_gomod, re.M)))
    lines = [
        "module nodemanager.local/apiserver-build",
        "",
        "go 1.24",
        "",
        f"require k8s.io/kubernetes {version}",
        "",
    ]
    lines += [f"replace {mod} => {mod} {staging_version(version)}" for mod in staging]
    return "\n".join(lines) + "\n"


def build(version: str = KUBERNETES_VERSION) -> Path:
    """The cached kube-apiserver, built first if missing."""
    return build_components((APISERVER,), version)[APISERVER]


def controller_manager(version: str = KUBERNETES_VERSION) -> Path:
    """The cached kube-controller-manager, built first if missing."""
    return build_components((CONTROLLER_MANAGER,), version)[CONTROLLER_MANAGER]


def build_components(
    components: tuple[str, ...] = COMPONENTS, version: str = KUBERNETES_VERSION
) -> dict[str, Path]:
    """The cached binaries of ``components``, the missing ones built first by one `go build`.
    Concurrent callers (several test sessions on one machine) wait for one build instead of
    starting their own."""
    targets = {c: binary_path(c, version) for c in components}
    if all(t.exists() for t in targets.values()):
        return targets
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"build-{version}-{_recipe(version)}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = {c: t for c, t in targets.items() if not t.exists()}
        if missing:
            _build(version, missing)
    return targets


def _build(version: str, targets: dict[str, Path]) -> None:
    if shutil.which("go") is None:
        raise RuntimeError(f"go is not installed: it is needed once to build {', '.join(targets)}")
    started = time.monotonic()
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory(prefix="apiserver-build-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text("module nodemanager.local/probe\n\ngo 1.24\n")
        info = json.loads(
            _go("mod", "download", "-json", f"k8s.io/kubernetes@{version}", cwd=work, env=env)
        )
        (work / "go.mod").write_text(wrapper_gomod(version, Path(info["GoMod"]).read_text()))
        imports = "".join(f'\t_ "k8s.io/kubernetes/cmd/{c}/app"\n' for c in COMPONENTS)
        (work / "main.go").write_text(f"package main\n\nimport (\n{imports})\n\nfunc main() {{}}\n")
        _go("mod", "tidy", cwd=work, env=env)
        out = work / "bin"
        out.mkdir()
        _go(
            "build",
            "-trimpath",
            "-ldflags",
            ldflags(version),
            "-o",
            f"{out}/",
            *(f"k8s.io/kubernetes/cmd/{c}" for c in targets),
            cwd=work,
            env=env,
        )
        for component, target in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            shutil.copyfile(out / component, partial)
            partial.chmod(0o755)
            os.replace(partial, target)
    elapsed = time.monotonic() - started
    print(f"built {', '.join(targets)} in {elapsed:.0f} s", file=sys.stderr)


def check_etcd() -> str:
    if not Path(ETCD).exists():
        raise RuntimeError(
            "etcd not found: install Debian's etcd-server (apt-get install etcd-server)"
        )
    return ETCD
