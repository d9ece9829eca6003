"""A Debian package of the agent file (dpkg-deb, no debhelper): `/usr/bin/nodemanager`, the
systemd unit, `/etc/nodemanager/` for the kubeconfig, `/etc/default/nodemanager` (a conffile
for the agent's flags), Depends on the Python and apt bindings it runs with; the copyright file
(DEP-5, naming every license the agent file bundles), a changelog and the third-party notices
in /usr/share/doc/nodemanager (lintian: tests/integration/test_deb.py). Purge removes
what the agent made (its state, its unpacked tree, the config directory) and the unit's
enablement; the files ConfigSets applied stay, as the README's uninstall says.

Usage: python deploy/deb.py AGENT_FILE OUT_DIR [ARCH]  (ARCH: x86_64 or aarch64)
"""

from __future__ import annotations

import datetime
import gzip
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from nodemanager.versionscheme import Version

import licenses  # deploy/licenses.py
from publisher import Publisher

ROOT = Path(__file__).resolve().parents[1]
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# ansible.builtin.apt respawns under the system Python with python3-apt.
DEPENDS = "python3 (>= 3.11), python3 (<< 3.14), python3-apt"
DEFAULTS = """\
# Extra flags of the nodemanager agent (--node-labels, --metrics-bind-address, ...).
NODEMANAGER_ARGS=""
"""
# The unit is not enabled at install: the agent needs `nodemanager bootstrap` first. An upgrade
# restarts a running agent on the new file; removal stops it; purge takes what it made and
# its enablement (the unit file is gone by then, so `systemctl disable` cannot).
#
# Over upstream nodemanager's layout (its deployment guide: a unit in /etc/systemd/system, which
# shadows this package's in /lib, and its binary in /usr/local/bin, ahead of /usr/bin on PATH)
# the package takes over: preinst refuses, before anything is unpacked, a unit whose ExecStart
# carries flags it cannot move by itself, naming the step to take; postinst moves upstream's
# unit and binary aside (<path>.upstream, the way back), enables this package's unit if the
# old one was enabled and restarts it if it ran. The node's kubeconfig and state stay.
UPSTREAM_UNIT = "/etc/systemd/system/nodemanager.service"
GUIDE_ARGS = (  # ExecStart arguments the takeover carries over (the guide's; this project's)
    "",
    "--kubeconfig /etc/nodemanager/kubeconfig",
    "--kubeconfig=/etc/nodemanager/kubeconfig",
    "--kubeconfig /etc/nodemanager/kubeconfig $NODEMANAGER_ARGS",
)
_CASES = "|".join(f'"{a}"' for a in GUIDE_ARGS).replace("$", "\\$")
SHADOW = f"""UNIT={UPSTREAM_UNIT}
WANTS=/etc/systemd/system/multi-user.target.wants/nodemanager.service
# The unit in /etc that shadows the packaged one: a regular file, not this package's own.
shadowed() {{ [ -f "$UNIT" ] && ! [ -L "$UNIT" ]; }}
exec_start() {{ sed -n 's/^ExecStart=//p' "$UNIT"; }}
"""
SCRIPTS = {
    "preinst": f"""#!/bin/sh
set -e
{SHADOW}
if shadowed; then
    start=$(exec_start)
    binary=${{start%% *}}
    args=$(echo "${{start#"$binary"}}" | sed 's/^ *//; s/ *$//')
    case "$args" in
        {_CASES}) ;;
        *)
            extra=$(echo "$args" | sed 's#--kubeconfig[= ]/etc/nodemanager/kubeconfig##; s/^ *//')
            echo "nodemanager: $UNIT (upstream nodemanager's unit?) starts '$start';" \\
                "the package cannot carry its flags over by itself. Move it aside and install" \\
                "again: mv $UNIT $UNIT.upstream && systemctl daemon-reload; then set" \\
                "NODEMANAGER_ARGS=\\"$extra\\" in /etc/default/nodemanager and run" \\
                "systemctl enable --now nodemanager" >&2
            exit 1
            ;;
    esac
    if [ "$(exec_start | wc -l)" -ne 1 ] || exec_start | grep -q '\\\\$'; then
        echo "nodemanager: $UNIT has more than one ExecStart line; move it aside and install" \\
            "again: mv $UNIT $UNIT.upstream && systemctl daemon-reload" >&2
        exit 1
    fi
fi
""",
    "postinst": f"""#!/bin/sh
set -e
{SHADOW}
BIN=/usr/local/bin/nodemanager
# upstream's agent is a Go binary (ELF); this project's agent file is a Python zipapp
elf() {{ [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }}
if [ "$1" = configure ]; then
    running=no
    if [ -d /run/systemd/system ] && systemctl is-active --quiet nodemanager.service; then
        running=yes
    fi
    if shadowed; then
        suffix=before-package
        if [ "$(exec_start | sed 's/ .*//')" = "$BIN" ] && elf "$BIN"; then
            suffix=upstream
        fi
        enabled=no
        [ -L "$WANTS" ] && enabled=yes
        mv "$UNIT" "$UNIT.$suffix"
        echo "nodemanager: moved $UNIT (it shadowed the packaged unit) to $UNIT.$suffix" >&2
        rm -f "$WANTS"
        if [ "$enabled" = yes ]; then
            ln -s /lib/systemd/system/nodemanager.service "$WANTS"
        fi
    fi
    if elf "$BIN"; then
        mv "$BIN" "$BIN.upstream"
        echo "nodemanager: moved upstream's $BIN (ahead of /usr/bin on PATH) to $BIN.upstream" >&2
    fi
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        if [ "$running" = yes ]; then
            systemctl restart nodemanager.service
        else
            systemctl try-restart nodemanager.service
        fi
    fi
fi
""",
    "prerm": """#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl stop nodemanager.service || true
fi
""",
    "postrm": """#!/bin/sh
set -e
if [ "$1" = purge ]; then
    rm -f /etc/systemd/system/multi-user.target.wants/nodemanager.service
    rm -rf /etc/nodemanager /var/lib/nodemanager /var/cache/nodemanager
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
""",
}


COMMON_LICENSES = Path("/usr/share/common-licenses")
DOC = Path("usr/share/doc/nodemanager")


def control(version: str, arch: str, size_kib: int, publisher: Publisher) -> str:
    fields = {
        "Package": "nodemanager",
        "Version": Version.parse(version).dpkg(),
        "Architecture": DEB_ARCH[arch],
        "Maintainer": publisher.maintainer,
        "Installed-Size": str(size_kib),
        "Depends": DEPENDS,
        "Section": "admin",
        "Priority": "optional",
        "Homepage": publisher.url,
        "Description": "keep a host's packages, files and services as Kubernetes declares them\n"
        " The nodemanager agent: applies the ConfigSets selecting this host with Ansible.",
    }
    return "".join(f"{key}: {value}\n" for key, value in fields.items())


def copyright_file(parts: list[licenses.Component], publisher: Publisher, year: str) -> str:
    """debian/copyright in the machine-readable format (DEP-5): nodemanager's own files under
    Apache-2.0; /usr/bin/nodemanager under every license of what it bundles, listed in the
    Comment, the texts in THIRD-PARTY-NOTICES.gz beside this file."""
    ids = sorted(set(re.findall(r"[A-Za-z0-9.+-]+", licenses.expression(parts))) - {"AND", "OR"})
    listed = "\n".join(f" {c.name} {c.version} ({c.kind}): {c.license}" for c in parts)
    paragraphs = [
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Upstream-Name: nodemanager\n"
        f"Upstream-Contact: {publisher.maintainer}\n"
        f"Source: {publisher.url}\n"
        "Comment: /usr/bin/nodemanager is one file (a Python zipapp) that bundles these\n"
        " Python packages and Ansible collections, each under its own license; their license\n"
        f" texts are in /{DOC}/THIRD-PARTY-NOTICES.gz.\n .\n{listed}",
        f"Files: *\nCopyright: {year} the nodemanager authors\nLicense: Apache-2.0",
        "Files: usr/bin/nodemanager\n"
        f"Copyright: {year} the nodemanager authors\n"
        " the authors of the bundled components (THIRD-PARTY-NOTICES.gz)\n"
        f"License: {' and '.join(ids)}",
    ]
    for spdx in ids:
        common = {"GPL-3.0-or-later": "GPL-3", "MPL-2.0": "MPL-2.0", "Apache-2.0": "Apache-2.0"}
        text = (
            f" On Debian systems the full text is in {COMMON_LICENSES / common[spdx]}."
            if spdx in common
            else f" The full text, with each component's notice, is in\n"
            f" /{DOC}/THIRD-PARTY-NOTICES.gz."
        )
        paragraphs.append(f"License: {spdx}\n{text}")
    return "\n\n".join(paragraphs) + "\n"


def changelog(version: str, date: str, publisher: Publisher) -> str:
    """A native package's changelog (Debian's format): this release's one entry."""
    when = datetime.datetime.fromisoformat(date) if date[:4].isdigit() else None
    stamp = (when or datetime.datetime.now(datetime.UTC)).strftime("%a, %d %b %Y %H:%M:%S %z")
    return (
        f"nodemanager ({Version.parse(version).dpkg()}) unstable; urgency=medium\n\n"
        f"  * Release {version}.\n"
        f"    The changes are in the project's history: {publisher.url}\n\n"
        f" -- {publisher.maintainer}  {stamp}\n"
    )


def _gzip(path: Path, text: str) -> None:
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))


def build_deb(
    agent: Path, out_dir: Path, version: str, arch: str, publisher: Publisher, date: str = ""
) -> Path:
    with tempfile.TemporaryDirectory(prefix="nodemanager-deb-") as tmp:
        root = Path(tmp) / "root"
        (root / "DEBIAN").mkdir(parents=True)
        (root / "usr" / "bin").mkdir(parents=True)
        (root / "usr" / "bin" / "nodemanager").write_bytes(agent.read_bytes())
        (root / "usr" / "bin" / "nodemanager").chmod(0o755)
        unit = (ROOT / "deploy" / "nodemanager.service").read_text()
        units = root / "lib" / "systemd" / "system"
        units.mkdir(parents=True)
        (units / "nodemanager.service").write_text(
            unit.replace("/usr/local/bin/nodemanager", "/usr/bin/nodemanager")
        )
        (root / "etc" / "nodemanager").mkdir(parents=True, mode=0o700)
        (root / "etc" / "default").mkdir()
        (root / "etc" / "default" / "nodemanager").write_text(DEFAULTS)
        doc = root / DOC
        doc.mkdir(parents=True)
        bundled = licenses.Files.of_zip(agent)
        parts = licenses.components(bundled)
        year = date[:4] if date[:4].isdigit() else str(datetime.date.today().year)
        (doc / "copyright").write_text(copyright_file(parts, publisher, year))
        _gzip(doc / "changelog.gz", changelog(version, date, publisher))
        _gzip(doc / "THIRD-PARTY-NOTICES.gz", bundled.read("THIRD-PARTY-NOTICES").decode())
        for path in root.rglob("*"):  # dpkg-deb keeps modes: make them Debian's, not umask's
            path.chmod(0o755 if path.is_dir() else 0o644)
        (root / "usr" / "bin" / "nodemanager").chmod(0o755)
        (root / "etc" / "nodemanager").chmod(0o700)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) // 1024 + 1
        (root / "DEBIAN" / "control").write_text(control(version, arch, size, publisher))
        (root / "DEBIAN" / "conffiles").write_text("/etc/default/nodemanager\n")
        for name, script in SCRIPTS.items():
            (root / "DEBIAN" / name).write_text(script)
            (root / "DEBIAN" / name).chmod(0o755)
        out_dir.mkdir(parents=True, exist_ok=True)
        deb = out_dir / f"nodemanager_{Version.parse(version).dpkg()}_{DEB_ARCH[arch]}.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(deb)],
            check=True,
            capture_output=True,
        )
    return deb


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from nodemanager.version import build_info

    import publisher

    arch = sys.argv[3] if len(sys.argv) > 3 else "x86_64"
    info = build_info()
    out = build_deb(Path(sys.argv[1]), Path(sys.argv[2]), info.version, arch, publisher.load())
    print(out)
