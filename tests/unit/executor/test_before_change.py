"""The fast path's ``before_change`` hook: it names the resources about to change, before they
change. The agent takes its lock groups and backups from that list (agent/hostfeatures.py); a
list of the converged ones instead (b104c2e to 27950cb) let two hosts of one lock_group restart
at once."""

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor.run import apply
from nodemanager.playbook.build import build


def test_before_change_names_what_changes_before_it_changes(tmp_path):
    same, changed = tmp_path / "same.conf", tmp_path / "changed.conf"
    same.write_text("same\n")
    changed.write_text("old\n")
    spec = {
        "files": [
            {"path": str(same), "content": "same\n"},
            {"path": str(changed), "content": "new\n"},
        ]
    }
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": spec})]), "debian", "n"
    )
    seen: list[tuple[list[str], str]] = []

    result = apply(
        plan, before_change=lambda resources: seen.append((resources, changed.read_text()))
    )

    assert seen == [([f"file:{changed}"], "old\n")]  # once, only the changing file, still old
    assert not result.ansible and not result.failed and changed.read_text() == "new\n"
