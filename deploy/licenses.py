"""What an artifact carries and under which licenses: every Python distribution (its dist-info)
and every Ansible collection (its MANIFEST.json or galaxy.yml), read from the artifact's own
files, never from the build's inputs; the SPDX expression of the whole; the third-party notices.

A license is taken, in this order, from the package's `License-Expression` (PEP 639), its
`License` field when that is an SPDX identifier (or a known spelling of one), its trove
classifier, or OVERRIDES (metadata that says only "BSD License"). A package none of them
resolves stops the build with its name: a new dependency is classified on purpose, not
shipped as "unknown". A collection's license is its `license` list, else the REUSE `LICENSES/`
directory it carries (community.general: GPL-3.0-or-later with some BSD-2-Clause, MIT and
PSF-2.0 files).

Used by deploy/build.py (THIRD-PARTY-NOTICES inside the agent file), deploy/deb.py (the
copyright file), deploy/recipes.py (license fields) and deploy/release.py (the SBOM).
"""

from __future__ import annotations

import json
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import yaml

OWN = "Apache-2.0"  # nodemanager's own license (LICENSE)
OWN_PARTS = {"nodemanager", "nodemanager.core"}  # in the SBOM, not among the third parties
ROOT = Path(__file__).resolve().parents[1]
DIST_INFO = re.compile(r"(?:^|/)([^/]+)-([^/-]+)\.dist-info/METADATA$")
COLLECTION = re.compile(r"(?:^|/)ansible_collections/([^/]+)/([^/]+)/(MANIFEST\.json|galaxy\.yml)$")
SPDX_ID = re.compile(r"^[A-Za-z0-9.+-]+$")
SPDX_EXPRESSION = re.compile(r"^[A-Za-z0-9.+-]+(?: (?:AND|OR|WITH) [A-Za-z0-9.+-]+)*$")
# `License:` spellings that are not SPDX identifiers, and what they mean.
SPELLINGS = {
    "apache 2.0": "Apache-2.0",
    "apache software license, version 2.0": "Apache-2.0",
    "isc license": "ISC",
    "mit license": "MIT",
}
CLASSIFIERS = {
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)": (
        "GPL-3.0-or-later"
    ),
}
# Read from each project's LICENSE file where the metadata is ambiguous ("BSD License").
OVERRIDES = {"jinja2": "BSD-3-Clause", "requests-oauthlib": "ISC"}
LICENSE_FILE = re.compile(r"(LICEN[CS]E|COPYING|NOTICE)[^/]*$", re.I)


@dataclass(frozen=True)
class Component:
    kind: str  # "pypi" or "ansible-collection"
    name: str
    version: str
    license: str  # an SPDX expression
    texts: tuple[str, ...]  # paths of its license files inside the artifact

    @property
    def purl(self) -> str:
        if self.kind == "pypi":
            return f"pkg:pypi/{self.name.lower().replace('_', '-')}@{self.version}"
        return f"pkg:generic/ansible-collection/{self.name}@{self.version}"


class Files:
    """The files of a zip or a directory by their path inside it (one reader for both)."""

    def __init__(self, names: Iterable[str], read: Callable[[str], bytes]):
        self.names = sorted(n for n in names if not n.endswith("/"))  # files, not directories
        self.read = read

    @classmethod
    def of_zip(cls, archive: Path) -> Files:
        zf = zipfile.ZipFile(archive)
        return cls(zf.namelist(), zf.read)

    @classmethod
    def of_tar(cls, archive: Path) -> Files:
        tar = tarfile.open(archive)
        members = {m.name: m for m in tar.getmembers() if m.isfile()}

        def read(name: str) -> bytes:
            extracted = tar.extractfile(members[name])
            assert extracted is not None
            return extracted.read()

        return cls(members, read)

    @classmethod
    def of_dir(cls, root: Path) -> Files:
        names = (str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        return cls(names, lambda name: (root / name).read_bytes())


def _python_license(name: str, meta: dict[str, list[str]]) -> str:
    expression = (meta.get("License-Expression") or [""])[0].strip()
    if SPDX_EXPRESSION.match(expression):
        return expression
    if name.lower() in OVERRIDES:
        return OVERRIDES[name.lower()]
    field = (meta.get("License") or [""])[0].strip()
    if SPDX_ID.match(field) and field.upper() != "UNKNOWN":
        return field
    if field.lower() in SPELLINGS:
        return SPELLINGS[field.lower()]
    found = sorted({CLASSIFIERS[c] for c in meta.get("Classifier", []) if c in CLASSIFIERS})
    if found:
        return " AND ".join(found)
    raise SystemExit(
        f"{name}: no SPDX license in its metadata; classify it in deploy/licenses.py OVERRIDES"
    )


def _python(files: Files, metadata: str, name: str, version: str) -> Component:
    parsed = HeaderParser().parsestr(files.read(metadata).decode("utf-8", "replace"))
    meta: dict[str, list[str]] = {}
    for key, value in parsed.items():
        meta.setdefault(key, []).append(value)
    dist_info = metadata.rsplit("/", 1)[0]
    texts = tuple(
        n for n in files.names if n.startswith(dist_info + "/") and LICENSE_FILE.search(n)
    )
    real_name = (meta.get("Name") or [name])[0]
    return Component("pypi", real_name, version, _python_license(real_name, meta), texts)


def _collection(files: Files, manifest: str, namespace: str, name: str) -> Component:
    raw = files.read(manifest)
    info = json.loads(raw)["collection_info"] if manifest.endswith(".json") else yaml.safe_load(raw)
    top = manifest.rsplit("/", 1)[0]
    reuse = sorted(
        n.rsplit("/", 1)[1].removesuffix(".txt")
        for n in files.names
        if n.startswith(top + "/LICENSES/") and n.count("/") == top.count("/") + 2
    )
    spdx = list(info.get("license") or []) or reuse
    if not spdx:
        raise SystemExit(f"{namespace}.{name}: no license in {manifest} and no LICENSES/")
    texts = tuple(
        n
        for n in files.names
        if n.startswith(top + "/")
        and (n.startswith(top + "/LICENSES/") or n == f"{top}/{info.get('license_file')}")
    )
    return Component(
        "ansible-collection", f"{namespace}.{name}", str(info["version"]), " AND ".join(spdx), texts
    )


def components(files: Files) -> list[Component]:
    """Every Python distribution and Ansible collection in files, each once (the agent file
    carries some distributions once per CPython minor), sorted by kind and name."""
    found: dict[tuple[str, str], Component] = {}
    for path in files.names:
        if m := DIST_INFO.search(path):
            c = _python(files, path, *m.groups())
        elif m := COLLECTION.search(path):
            c = _collection(files, path, *m.groups()[:2])
        else:
            continue
        found.setdefault((c.kind, c.name.lower()), c)
    return sorted(found.values(), key=lambda c: (c.kind, c.name.lower()))


def expression(parts: Iterable[Component], own: str = OWN) -> str:
    """The SPDX expression of a work made of nodemanager and parts: each distinct license,
    joined by AND (a choice such as `Apache-2.0 OR BSD-3-Clause` kept in parentheses)."""
    found = {own}
    for c in parts:
        for term in re.split(r" AND ", c.license):
            found.add(term)
    return " AND ".join(f"({t})" if " OR " in t else t for t in sorted(found))


def notices(parts: list[Component], files: Files) -> str:
    """THIRD-PARTY-NOTICES: what is bundled, under which license, then each license text."""
    lines = [
        "nodemanager bundles the following third-party software. nodemanager itself is",
        "licensed under the Apache License 2.0 (LICENSE); each component below keeps its own",
        "license, whose text follows the list. The whole is distributed under:",
        f"  {expression(parts)}",
        "",
    ]
    others = [c for c in parts if c.name.lower() not in OWN_PARTS]
    lines += [f"{c.name} {c.version} ({c.kind}): {c.license}" for c in others]
    for c in others:
        for text in c.texts:
            body = files.read(text).decode("utf-8", "replace").rstrip()
            lines += ["", "=" * 78, f"{c.name} {c.version}: {text.rsplit('/', 1)[1]}", "=" * 78]
            lines += [body]
    return "\n".join(lines) + "\n"
