"""Environments that keep paths literal through Ansible's expandvars + expanduser."""

import os.path

import pytest

from nodemanager.playbook.literal import NotLiteral, literal_env


def _expanded(value: str, env: dict[str, str], monkeypatch) -> str:
    # What Ansible's `path` type does in the module, in the task's environment.
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("USER", "root")
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    return os.path.expanduser(os.path.expandvars(value))


@pytest.mark.parametrize(
    "value",
    [
        "/plain",
        "$HOME/x",
        "/a/${USER}/b",
        "~",
        "~/x",
        "../$HOME/~",
        "/x$",
        "/$1/a",
        "/a/$HOME$USER",
        "/${A B}",
    ],
)
def test_values_survive_expansion(value, monkeypatch):
    env = literal_env([value])
    assert _expanded(value, env, monkeypatch) == value


def test_nothing_to_keep_needs_no_environment():
    assert literal_env(["/etc/x", "relative/target"]) == {}


@pytest.mark.parametrize("values", [["$HOME", "${HOME}"], ["~/x", "$HOME/y"], ["~root/x"]])
def test_values_that_cannot_stay_literal_are_refused(values):
    with pytest.raises(NotLiteral):
        literal_env(values)
