"""Build hook: copy the run-time data (playbook skeletons, the project's own Ansible collection)
into the package, so `pip install .` and pipx install a working tool, and stamp the version from
git into the sdist and the wheel (`nodemanager/_build.json`: an sdist has no git, so a wheel
built from it reads the stamp). Metadata is in pyproject.toml; an editable install reads the
data from the checkout instead."""

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from nodemanager.version import release_info, stamp  # noqa: E402  (standard library only)

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
        stamp(Path(self.build_lib) / "nodemanager", ROOT)


class SdistWithStamp(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        stamp(Path(base_dir) / "nodemanager", ROOT)


setup(
    version=release_info(ROOT).version,
    cmdclass={"build_py": BuildWithData, "sdist": SdistWithStamp},
)
