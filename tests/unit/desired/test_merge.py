from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge


def cs(name, **spec):
    return ConfigSet.from_dict({"metadata": {"name": name}, "spec": spec})


def test_identical_declarations_merge_silently():
    a = cs("a", packages=[{"name": "vim"}], files=[{"path": "/x", "content": "1", "mode": "644"}])
    b = cs(
        "b",
        packages=[{"name": "vim", "ensure": "installed"}],
        files=[{"path": "/x", "content": "1", "mode": "0644"}],
    )
    d = merge([a, b])
    assert not d.conflicts
    assert [(r.id, r.configsets) for r in d.resources] == [
        ("package:vim", ("a", "b")),
        ("file:/x", ("a", "b")),
    ]


def test_conflict_removes_only_that_resource_and_names_both():
    a = cs("a", files=[{"path": "/x", "content": "1"}, {"path": "/only-a", "content": "a"}])
    b = cs(
        "b",
        files=[{"path": "/x", "content": "2"}],
        services=[{"name": "sshd", "ensure": "running"}],
    )
    d = merge([a, b])
    assert [r.id for r in d.resources] == ["file:/only-a", "service:sshd"]
    assert d.conflicts_of("a") == ["file:/x"] and d.conflicts_of("b") == ["file:/x"]


def test_resources_follow_configset_order_and_kind_order():
    first = cs("first", executions=[{"command": "/bin/true"}], packages=[{"name": "p1"}])
    second = cs("second", files=[{"path": "/f"}], packages=[{"name": "p2"}])
    assert [r.id for r in merge([first, second]).resources] == [
        "package:p1",
        "execution:/bin/true",
        "package:p2",
        "file:/f",
    ]


def test_executions_are_identified_by_argv():
    a = cs("a", executions=[{"command": "/bin/echo", "args": ["a b"]}])
    b = cs("b", executions=[{"command": "/bin/echo", "args": ["a", "b"]}])
    assert [r.key for r in merge([a, b]).resources] == ["/bin/echo 'a b'", "/bin/echo a b"]


def test_resource_ids_are_typed_and_keep_their_text_form():
    from nodemanager.desired.merge import ResourceId

    rid = ResourceId.of("file", "/etc/a:b")
    assert rid == "file:/etc/a:b" and (rid.kind, rid.key) == ("file", "/etc/a:b")
    assert {rid: 1}["file:/etc/a:b"] == 1


def test_modes_spelled_differently_do_not_conflict():
    a = cs("a", files=[{"path": "/tmp/x", "ensure": "directory", "mode": "1777"}])
    b = cs("b", files=[{"path": "/tmp/x", "ensure": "directory", "mode": "01777"}])
    d = merge([a, b])
    assert not d.conflicts
    assert [(r.id, r.configsets) for r in d.resources] == [("file:/tmp/x", ("a", "b"))]
