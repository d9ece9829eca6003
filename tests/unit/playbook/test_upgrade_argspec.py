"""The OS upgrade task of each family checked against its module's own argument spec (apk,
pkg and pacman cannot run on this Debian machine; apt runs for real in
tests/integration/test_upgrade.py)."""

import pytest

from nodemanager.playbook.render import leaves, module_of
from nodemanager.playbook.upgrade import upgrade_plan
from tests.unit.playbook.argspec import validate


@pytest.mark.parametrize(
    "family, module",
    [
        ("arch", "community.general.pacman"),
        ("alpine", "community.general.apk"),
        ("freebsd", "community.general.pkgng"),
        ("debian", "ansible.builtin.apt"),
        ("fedora", "ansible.builtin.dnf"),
    ],
)
def test_argspec_upgrade_task_is_valid_for_its_module(family, module):
    (task,) = leaves(upgrade_plan(family, "n").playbook[0]["tasks"])
    name, params = module_of(task)
    assert name == module
    validate(name, params)
