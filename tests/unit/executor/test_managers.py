"""Contracts of the package batches.

The list task the fast path hands each module validates against that module's own
argument_spec (ansible-core's validator, the spec read from the installed module); dnf's dry run
reader is checked against dnf's documented output (dnf does not run here); modules whose lists
are declined get one task per name. pacman, apt, apk and pkg run for real in
tests/integration/ (test_differential_packages.py, test_differential_apt.py,
test_differential_apk.py, test_differential_pkgng.py).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor import batch, managers
from nodemanager.executor.config import COLLECTIONS_PATH
from nodemanager.playbook.build import build
from nodemanager.playbook.render import module_of
from nodemanager.playbook.subset import Batch, segment

FAMILIES = {
    "arch": "community.general.pacman",
    "alpine": "community.general.apk",
    "freebsd": "community.general.pkgng",
    "debian": "ansible.builtin.apt",
    "fedora": "ansible.builtin.dnf",
}


class _Spec(Exception):
    def __init__(self, kwargs: dict[str, Any]):
        self.kwargs = kwargs


def _argument_spec(module: str) -> dict[str, Any]:
    """What the module passes to AnsibleModule, caught at the call: its real spec."""
    namespace, collection, name = module.split(".")
    if namespace == "ansible":
        path = Path(importlib.util.find_spec("ansible.modules").origin).parent / f"{name}.py"
    else:
        path = COLLECTIONS_PATH / "ansible_collections" / namespace / collection
        path = path / "plugins" / "modules" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_spec_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)

    def catch(**kwargs: Any) -> None:
        raise _Spec(kwargs)

    mod.AnsibleModule = catch
    with pytest.raises(_Spec) as caught:
        mod.main()
    return caught.value.kwargs


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value) if isinstance(value, str) else value


@pytest.mark.parametrize("ensure", ["installed", "absent"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_list_task_validates_against_the_modules_argument_spec(family, ensure):
    cs = ConfigSet.from_dict(
        {
            "metadata": {"name": "c"},
            "spec": {"packages": [{"name": n, "ensure": ensure} for n in ("vim", "git", "tmux")]},
        }
    )
    plan = build(merge([cs]), family, "n")
    steps = plan.tasks()
    (block,) = segment(plan, [Batch("list", tuple(steps))]).playbook[0]["tasks"]
    (listed,) = block["block"]
    module, params = module_of(listed)
    assert module == FAMILIES[family]
    assert _plain(params) == {
        "name": ["vim", "git", "tmux"],
        "state": "present" if ensure == "installed" else "absent",
    }
    assert [t["name"] for t in block["rescue"]] == [s.task for s in steps]
    kwargs = _argument_spec(module)
    validator = ArgumentSpecValidator(
        kwargs["argument_spec"],
        **{k: kwargs[k] for k in ("mutually_exclusive", "required_one_of") if k in kwargs},
    )
    result = validator.validate(_plain(params))
    assert not result.error_messages, result.error_messages
    assert result.validated_parameters["name"] == ["vim", "git", "tmux"]


def test_dnf_transaction_documented_output():
    text = (
        "Dependencies resolved.\n" + "=" * 40 + "\n"
        " Package      Architecture   Version      Repository   Size\n" + "=" * 40 + "\n"
        "Installing:\n foo          x86_64         1.0-1.fc39   fedora       10 k\n"
        "Installing weak dependencies:\n libbar       x86_64   1-1   fedora   1 k\n"
        "Installing dependencies:\n libfoo       x86_64         2.1-3.fc39   fedora       50 k\n\n"
        "Transaction Summary\n" + "=" * 40 + "\nInstall  3 Packages\n\nOperation aborted.\n"
    )
    assert list(managers.dnf_transaction(text)) == ["foo", "libbar", "libfoo"]


@pytest.mark.parametrize(
    "name,plain", [("vim", True), ("libstdc++", True), ("core/vim", False), ("libc6:i386", False)]
)
def test_only_plain_names_are_read_natively(name, plain):
    cs = ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": {"packages": [{"name": name}]}})
    (step,) = build(merge([cs]), "arch", "n").tasks()
    assert managers.plain(step) is plain
    if not plain:
        assert managers.Pacman().converged(step) is None


def test_a_pinned_version_is_the_modules_to_read():
    cs = ConfigSet.from_dict(
        {"metadata": {"name": "c"}, "spec": {"packages": [{"name": "vim", "version": "9.1"}]}}
    )
    (step,) = build(merge([cs]), "fedora", "n").tasks()
    assert step.name == "vim-9.1" and not managers.plain(step)
    assert managers.Dnf().converged(step) is None


def test_the_manager_is_read_once_until_forget():
    # One database read per run: every name's probe shares it, and after anything that
    # changed packages the next question reads it again.
    reads = []

    class Counted(managers.Manager):
        def list_installed(self) -> set[str]:
            reads.append(1)
            return {"a"}

    m = Counted()
    assert m.installed() == {"a"} and m.installed() == {"a"}
    assert len(reads) == 1
    m.forget()
    m.installed()
    assert len(reads) == 2


def test_pacman_info_documented_output():
    # `pacman -Si` (pacman 6.0): a field per line, a long list going on indented (COLUMNS set).
    text = """Repository      : core
Name            : bash
Version         : 5.2.026-2
Provides        : sh
Depends On      : readline>=7.0  glibc
                  ncurses
Conflicts With  : None
Replaces        : None
Validated By    : SHA-256 Sum  Signature

Repository      : extra
Name            : vim
Depends On      : None
"""
    bash, vim = managers._info_fields(text.splitlines())
    assert bash["Name"] == "bash" and bash["Repository"] == "core"
    assert managers._words(bash["Depends On"]) == {"readline>=7.0", "glibc", "ncurses"}
    assert managers._words(bash["Provides"]) == {"sh"} and bash["Replaces"] == "None"
    assert vim == {"Repository": "extra", "Name": "vim", "Depends On": "None"}
    assert managers._words(vim["Depends On"]) == set()


@pytest.mark.parametrize("module", sorted(batch.DECLINED))
def test_declined_modules_get_one_task_per_name(module):
    """A module whose lists are declined (batch.DECLINED, with its reason) gets each name as
    its own task, whatever the manager would answer: its answers are never asked."""

    class Answers(managers.Manager):
        def effect(self, name: str, state: str) -> managers.Effect | None:
            raise AssertionError("a declined module's dry run is never asked")

    Answers.module = module
    family = next(f for f, m in FAMILIES.items() if m == module)
    cs = ConfigSet.from_dict(
        {"metadata": {"name": "c"}, "spec": {"packages": [{"name": n} for n in ("a", "b", "c")]}}
    )
    steps = build(merge([cs]), family, "n").tasks()
    assert batch.plan(steps, Answers()).units == list(steps)
    assert module in managers.MANAGERS and batch.DECLINED[module]


def test_pkg_dry_run_output():
    """pkg 2.8's own words (tests/integration/test_differential_pkgng.py runs it for real)."""
    text = (
        "Checking integrity... done (0 conflicting)\n"
        "The following 2 package(s) will be affected (of 0 checked):\n\n"
        "New packages to be INSTALLED:\n\tnmt-bad: 1.0\n\tnmtest-hello: 1.0\n\n"
        "Installed packages to be UPGRADED:\n\tnmt-l1: 1.0 -> 1.1\n\n"
        "Number of packages to be installed: 2\n"
    )
    found = managers._matched(managers.PKG_EFFECT, text.splitlines())
    assert list(found or {}) == ["nmt-bad", "nmtest-hello", "nmt-l1"]
