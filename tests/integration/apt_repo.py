"""A local apt repository of test packages (a flat repository: the .debs and a Packages index),
for real ansible.builtin.apt runs inside a booted Debian machine (tests/integration/machines.py)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def build_deb(
    repo: Path,
    version: str,
    name: str = "nmtest-hello",
    depends: tuple[str, ...] = (),
    provides: tuple[str, ...] = (),
) -> None:
    """A package installing /opt/nmtest/<name>/VERSION and the conffile /etc/<name>.conf; the
    repository's Packages index is rewritten to list every .deb in it."""
    root = repo.parent / f"build-{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "opt" / "nmtest" / name).mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "opt" / "nmtest" / name / "VERSION").write_text(version + "\n")
    (root / "etc" / f"{name}.conf").write_text("greeting = hello\n")
    (root / "DEBIAN" / "conffiles").write_text(f"/etc/{name}.conf\n")
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: nodemanager tests <t@example.invalid>\n"
        "Description: nodemanager test package\n"
    )
    control += f"Depends: {', '.join(depends)}\n" if depends else ""
    control += f"Provides: {', '.join(provides)}\n" if provides else ""
    (root / "DEBIAN" / "control").write_text(control)
    deb = repo / f"{name}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)],
        check=True,
        capture_output=True,
    )
    entries = []
    for pkg in sorted(repo.glob("*.deb")):
        fields = subprocess.run(
            ["dpkg-deb", "-f", str(pkg)], check=True, capture_output=True, text=True
        ).stdout
        data = pkg.read_bytes()
        entries.append(
            fields.rstrip("\n") + f"\nFilename: ./{pkg.name}\nSize: {len(data)}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    (repo / "Packages").write_text("\n".join(entries))
