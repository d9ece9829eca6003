"""The backup store on real files: layout and modes, versions, restore, garbage collection."""

import hashlib
import os
import stat
from pathlib import Path

import pytest

from nodemanager.host.backups import BackupError, BackupStore


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_save_is_content_addressed_private_and_deduplicated(tmp_path):
    target = tmp_path / "etc.conf"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    os.chown(target, 1, 1)
    store = BackupStore(tmp_path / "state")
    sha = hashlib.sha256(b"old\n").hexdigest()
    assert store.save([(str(target), False)]) == {str(target): sha}
    store.save([(str(target), False)])  # same bytes again: no second version

    blob = tmp_path / "state" / "backups" / "blobs" / sha[:2] / sha
    assert blob.read_bytes() == b"old\n"
    assert mode(blob) == 0o600
    assert mode(tmp_path / "state" / "backups") == 0o700
    assert mode(blob.parent) == 0o700
    assert mode(store.index_path) == 0o600
    (version,) = store.versions(str(target))
    assert (version.sha256, version.mode, version.uid, version.gid) == (sha, 0o640, 1, 1)


def test_missing_files_directories_and_symlinks_are_not_backed_up(tmp_path):
    (tmp_path / "dir").mkdir()
    os.symlink("/etc/hostname", tmp_path / "link")
    store = BackupStore(tmp_path / "state")
    paths = [(str(tmp_path / n), False) for n in ("missing", "dir", "link")]
    assert store.save(paths) == {}
    assert not store.index_path.exists()


def test_restore_puts_content_mode_and_owner_back_and_saves_what_it_replaces(tmp_path):
    target = tmp_path / "f"
    target.write_text("v1")
    os.chmod(target, 0o600)
    os.chown(target, 2, 2)
    clock = iter(range(100, 200))
    store = BackupStore(tmp_path / "state", clock=lambda: float(next(clock)))
    v1 = store.save([(str(target), False)])[str(target)]
    target.write_text("v2")
    os.chmod(target, 0o644)
    os.chown(target, 0, 0)
    v2 = store.save([(str(target), False)])[str(target)]
    target.write_text("v3")

    store.restore(str(target), v1[:8])  # a prefix is enough
    assert target.read_text() == "v1"
    assert (mode(target), os.stat(target).st_uid, os.stat(target).st_gid) == (0o600, 2, 2)
    # v3 was saved before it was overwritten, so the restore itself can be undone.
    assert [v.sha256 for v in store.versions(str(target))][-1] == hashlib.sha256(b"v3").hexdigest()

    store.restore(str(target), v2)
    assert target.read_text() == "v2" and mode(target) == 0o644


def test_restore_errors_name_the_path(tmp_path):
    store = BackupStore(tmp_path / "state")
    with pytest.raises(BackupError, match="/nowhere: no backup"):
        store.restore("/nowhere")
    target = tmp_path / "f"
    target.write_text("x")
    store.save([(str(target), False)])
    with pytest.raises(BackupError, match="no backup with hash abc"):
        store.restore(str(target), "abc")
    with pytest.raises(BackupError, match="not a hexadecimal"):
        store.restore(str(target), "../../etc/passwd")


def test_gc_drops_old_versions_and_their_unreferenced_blobs(tmp_path):
    now = [1000.0]
    store = BackupStore(tmp_path / "state", clock=lambda: now[0])
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("shared")
    b.write_text("old-b")
    store.save([(str(a), False), (str(b), False)])
    now[0] = 5000.0
    b.write_text("shared")  # same content as a's old version: one blob, kept while referenced
    store.save([(str(b), False)])

    assert store.gc(max_age=2000) == 1  # only old-b's blob goes
    assert str(a) not in store.index()
    assert [v.sha256 for v in store.versions(str(b))] == [hashlib.sha256(b"shared").hexdigest()]
    blobs = list((tmp_path / "state" / "backups" / "blobs").glob("*/*"))
    assert [p.name for p in blobs] == [hashlib.sha256(b"shared").hexdigest()]


def test_restore_brings_a_setuid_file_back_setuid_with_its_owner(tmp_path):
    """#27 item 9: a chown after the write cleared setuid (the file came back 0755)."""
    from click.testing import CliRunner

    from nodemanager.cli import main

    target = tmp_path / "helper"
    target.write_text("#!/bin/sh\n")
    os.chown(target, 2, 3)
    os.chmod(target, 0o4755)  # after the chown, which would clear it
    state = tmp_path / "state"
    BackupStore(state).save([(str(target), False)])
    target.write_text("replaced\n")
    os.chown(target, 0, 0)
    os.chmod(target, 0o644)
    result = CliRunner().invoke(main, ["restore", str(target), "--state-dir", str(state)])
    assert result.exit_code == 0, result.output
    st = os.stat(target)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o4755, 2, 3)
    assert "mode 4755, owner " in result.stderr


def upstream_save(bucket, path, backed_up_at="2026-11-01T10:00:00Z"):
    """What upstream's SaveToFileBucket leaves (pkg/files/files.go): the blob at
    <bucket>/<h[0:2]>/<h[2:4]>/<h[4:]> (0600, dirs 0700) and its JSON sidecar ``.meta``.
    tests/integration/test_upstream_filebucket.py runs upstream's own code for the same."""
    import json

    data = Path(path).read_bytes()
    st = os.stat(path)
    sha = hashlib.sha256(data).hexdigest()
    blob = bucket / sha[0:2] / sha[2:4] / sha[4:]
    blob.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    blob.write_bytes(data)
    meta = {
        "path": str(path),
        "backedUpAt": backed_up_at,
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "uid": st.st_uid,
        "gid": st.st_gid,
        "owner": "nobody" if st.st_uid == 65534 else "root",
        "group": "nogroup" if st.st_gid == 65534 else "root",
    }
    blob.with_name(blob.name + ".meta").write_text(json.dumps(meta))
    return sha


def test_upstreams_filebucket_is_listed_restored_and_collected(tmp_path):
    target = tmp_path / "app.conf"
    target.write_text("upstream's old\n")
    os.chmod(target, 0o640)
    os.chown(target, 65534, 65534)
    state = tmp_path / "state"
    old = upstream_save(state / "filebucket", target)  # upstream's default, in our state dir
    target.write_text("newer\n")
    ours = BackupStore(state).save([(str(target), False)])[str(target)]

    store = BackupStore(state)
    assert [v.sha256 for v in store.versions(str(target))] == [old, ours]  # oldest first
    restored = store.restore(str(target), old[:8])
    assert target.read_text() == "upstream's old\n" and mode(target) == 0o640
    assert (os.stat(target).st_uid, os.stat(target).st_gid) == (65534, 65534)
    assert restored.saved_at_text == "2026-11-01T10:00:00Z"
    # Another bucket path (upstream's -configset.file-bucket.path) is read when named.
    elsewhere = tmp_path / "bucket"
    other = tmp_path / "other.conf"
    other.write_text("o\n")
    upstream_save(elsewhere, other)
    assert BackupStore(state).versions(str(other)) == []
    assert len(BackupStore(state, filebucket=elsewhere).versions(str(other))) == 1
    # Collected by age, blob and sidecar, as upstream's GCFileBucket (by the blob's mtime).
    blob = state / "filebucket" / old[0:2] / old[2:4] / old[4:]
    os.utime(blob, (1, 1))
    assert BackupStore(state).gc(86400) >= 1
    assert not blob.exists() and not blob.with_name(blob.name + ".meta").exists()


def test_restore_on_the_command_line_reads_upstreams_filebucket(tmp_path):
    from click.testing import CliRunner

    from nodemanager.cli import main

    target = tmp_path / "f"
    target.write_text("before\n")
    state = tmp_path / "state"
    sha = upstream_save(state / "filebucket", target)
    target.write_text("after\n")
    listed = CliRunner().invoke(main, ["restore", str(target), "--list", "--state-dir", str(state)])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.startswith(f"{sha}  2026-11-01T10:00:00Z  0644 root:root")
    done = CliRunner().invoke(
        main, ["restore", str(target), "--hash", sha[:12], "--state-dir", str(state)]
    )
    assert done.exit_code == 0, done.output
    assert target.read_text() == "before\n"
