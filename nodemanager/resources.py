"""Where the data files nodemanager reads at run time live: the playbook skeletons and the
project's own Ansible collection.

A source checkout (and an editable install) reads them from the repository root. A wheel
(`pip install .`, pipx) carries copies inside the package, under ``nodemanager/_data/``: setup.py
puts them there at build time, so the installed tool works outside the repository.
"""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "_data"
CHECKOUT = Path(__file__).resolve().parents[1]


def data_path(name: str) -> Path:
    """``name`` (``playbook_templates`` or ``collections``) in the package, else in the checkout."""
    packaged = PACKAGED / name
    return packaged if packaged.exists() else CHECKOUT / name
