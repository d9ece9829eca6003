"""One file, one spelling: aliases of a path are refused at parse time, naming the field."""

from __future__ import annotations

import pytest

from nodemanager.api import ConfigSet, InvalidObject


def errors_of(spec):
    try:
        ConfigSet.from_dict({"metadata": {"name": "p"}, "spec": spec})
    except InvalidObject as e:
        return [str(x) for x in e.errors]
    return []


@pytest.mark.parametrize(
    "path, problem",
    [
        ("/x//a.conf", "must not contain '//' or end with '/'"),
        ("/x/", "must not contain '//' or end with '/'"),
        ("/", "must not contain '//' or end with '/'"),
        ("/x/./a.conf", "must not contain a '.' segment"),
        ("/x/.", "must not contain a '.' segment"),
        ("/x/../a.conf", "must not contain a '..' segment"),
        ("/x/a\x00b", "must not contain control characters"),
        ("/x/a\nb", "must not contain control characters"),
        ("/x/a\rb", "must not contain control characters"),
    ],
)
def test_path_aliases_and_control_characters_are_refused(path, problem):
    errors = errors_of({"files": [{"path": path}]})
    assert any(e.startswith("spec.files[0].path: ") and problem in e for e in errors), errors


def test_subscribe_files_are_checked_alike():
    errors = errors_of(
        {
            "services": [{"name": "s", "subscribe_files": ["/ok", "/x//a.conf"]}],
            "executions": [{"command": "/bin/true", "subscribe_files": ["/x/."]}],
        }
    )
    assert any(e.startswith("spec.services[0].subscribe_files[1]: ") for e in errors), errors
    assert any(e.startswith("spec.executions[0].subscribe_files[0]: ") for e in errors), errors


@pytest.mark.parametrize("path", ["/x/a.conf", "/x/.hidden", "/x/..a", "/x/a..", "/x/...", "/a"])
def test_canonical_paths_pass(path):
    assert errors_of({"files": [{"path": path}]}) == []
