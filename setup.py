"""Build hook: copy the run-time data (playbook skeletons, the project's own Ansible collection)
into the package, so `pip install .` and pipx install a working tool. Metadata is in
pyproject.toml; an editable install reads the data from the checkout instead."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = {
    "playbook_templates": ROOT / "playbook_templates",
    "collections/ansible_collections/nodemanager": ROOT
    / "collections"
    / "ansible_collections"
    / "nodemanager",
}


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "nodemanager" / "_data"
        for name, source in DATA.items():
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildWithData})
