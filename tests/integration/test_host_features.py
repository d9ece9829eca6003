"""File backups and the WireGuard key through the real reconciler and executor (native writes
and ansible-runner), the real `nodemanager restore` command and Debian's wireguard-tools."""

import base64
import hashlib
import logging
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from nodemanager.agent.hostfeatures import HostFeatures
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.reconcile import Reconciler
from nodemanager.agent.state import Snapshot, StateStore
from nodemanager.host.backups import BackupStore
from tests.integration.helpers import nm

pytestmark = pytest.mark.ansible


def reconciler(state, observe=lambda: {}):
    return Reconciler(
        name="n1",
        managed_labels={"kubernetes.io/hostname": "n1"},
        family="debian",
        store=StateStore(str(state)),
        metrics=Metrics(),
        agent_version="t",
        observe=observe,
        host=HostFeatures(str(state), backup_max_age=3600),
    )


def snap(files, spec=None, rv="1", secrets=None):
    cs = {
        "metadata": {"name": "cs", "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "spec": {"selector": {}, "files": files},
    }
    node = {"metadata": {"name": "n1", "labels": {}, "generation": 1}, "spec": spec or {}}
    return Snapshot(node=node, configsets=[cs], secrets=secrets or {})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_backup_before_native_write_and_ansible_removal_then_restore(tmp_path):
    state, conf, gone = tmp_path / "state", tmp_path / "app.conf", tmp_path / "gone.conf"
    conf.write_text("hand edited\n")
    os.chmod(conf, 0o640)
    gone.write_text("to be removed\n")
    r = reconciler(state)

    files = [
        {"path": str(conf), "content": "managed\n", "mode": "0644"},  # the fast path writes it
        {"path": str(gone), "ensure": "absent"},  # Ansible's file module removes it
    ]
    result = r.reconcile(snap(files), full=True)
    assert not result.failed, result.status
    assert conf.read_text() == "managed\n" and not gone.exists()
    backups = result.status["fileBackups"]  # upstream's shape: path -> sha256
    assert backups == {str(conf): sha(b"hand edited\n"), str(gone): sha(b"to be removed\n")}

    # Converged: a second run backs up nothing new.
    again = r.reconcile(snap(files), full=True)
    assert again.status["fileBackups"] == backups

    restored = nm("restore", str(conf), "--state-dir", str(state))
    assert restored.returncode == 0, restored.stderr
    assert conf.read_text() == "hand edited\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640
    restored = nm(
        "restore", str(gone), "--hash", sha(b"to be removed\n")[:10], "--state-dir", str(state)
    )
    assert restored.returncode == 0, restored.stderr
    assert gone.read_text() == "to be removed\n"
    listed = nm("restore", str(conf), "--list", "--state-dir", str(state))
    assert sha(b"hand edited\n") in listed.stdout and sha(b"managed\n") in listed.stdout

    missing = nm("restore", str(tmp_path / "never"), "--state-dir", str(state))
    assert missing.returncode != 0 and "no backup" in missing.stderr


def test_secret_fed_file_is_backed_up_on_the_host_only(tmp_path):
    state, target = tmp_path / "state", tmp_path / "token"
    target.write_text("old-secret-value")
    r = reconciler(state)
    files = [
        {"path": str(target), "template": "{{ node.secrets.token }}", "secretRefs": [{"name": "s"}]}
    ]
    secrets = {"s": {"token": base64.b64encode(b"new-secret-value").decode()}}
    result = r.reconcile(snap(files, secrets=secrets), full=True)
    assert not result.failed, result.status
    assert target.read_text() == "new-secret-value"
    assert result.status["fileBackups"] == {}
    assert "old-secret-value" not in repr(result.status)
    (version,) = BackupStore(state).versions(str(target))
    assert version.secret and version.sha256 == sha(b"old-secret-value")


def test_wireguard_key_made_once_kept_and_only_public_key_reported(tmp_path):
    state = tmp_path / "state"
    spec = {"wireGuard": {"enabled": True}}
    first = reconciler(state).reconcile(snap([], spec), full=True)
    (entry,) = first.status["wireGuard"]
    assert entry["name"] == "wg0"
    key_file = state / "wireguard" / "wg0.key"
    private = key_file.read_text().strip()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    derived = subprocess.run(["wg", "pubkey"], input=private + "\n", capture_output=True, text=True)
    assert entry["publicKey"] == derived.stdout.strip()
    assert private not in repr(first.status)

    # A restarted agent (a new reconciler) keeps the key.
    second = reconciler(state).reconcile(snap([], spec), full=True)
    assert second.status["wireGuard"] == first.status["wireGuard"]

    # An existing key is adopted, never replaced; another interface gets its own.
    other = tmp_path / "other"
    (other / "wireguard").mkdir(parents=True)
    existing = subprocess.run(["wg", "genkey"], capture_output=True, text=True).stdout.strip()
    (other / "wireguard" / "wg1.key").write_text(existing + "\n")
    spec = {"wireGuard": {"enabled": True, "interface": "wg1"}}
    adopted = reconciler(other).reconcile(snap([], spec), full=True)
    pub = subprocess.run(["wg", "pubkey"], input=existing, capture_output=True, text=True)
    assert adopted.status["wireGuard"] == [
        {"name": "wg1", "publicKey": pub.stdout.strip(), "listenPort": 0}
    ]
    assert (other / "wireguard" / "wg1.key").read_text().strip() == existing


def test_wireguard_bad_interface_is_an_event_naming_the_field(tmp_path):
    spec = {"wireGuard": {"enabled": True, "interface": "bad name/../x"}}
    result = reconciler(tmp_path / "state").reconcile(snap([], spec), full=True)
    assert result.event and result.event[0] == "WireGuardKeyFailed"
    assert "spec.wireGuard.interface" in result.event[1]
    assert "wireGuard" not in result.status or result.status["wireGuard"] == []


def test_files_a_purge_removes_are_named_in_the_log_and_backed_up(tmp_path, caplog):
    state, d = tmp_path / "state", tmp_path / "conf.d"
    d.mkdir()
    (d / "declared.conf").write_text("mine\n")
    (d / "stray.conf").write_text("left by hand\n")
    (d / "sub").mkdir()  # subdirectories are never purged
    r = reconciler(state)
    files = [
        {"path": str(d), "ensure": "directory", "purge": True},
        {"path": str(d / "declared.conf"), "content": "mine\n"},
    ]
    with caplog.at_level(logging.INFO, logger="nodemanager.agent.hostfeatures"):
        result = r.reconcile(snap(files), full=True)
    assert not result.failed, result.status
    assert not (d / "stray.conf").exists() and (d / "sub").is_dir()
    assert f"purge of {d} removes {d / 'stray.conf'} (backed up first)" in caplog.text
    assert result.status["fileBackups"] == {str(d / "stray.conf"): sha(b"left by hand\n")}
    restored = nm("restore", str(d / "stray.conf"), "--state-dir", str(state))
    assert restored.returncode == 0, restored.stderr
    assert (d / "stray.conf").read_text() == "left by hand\n"


def test_local_apply_backs_up_what_it_replaces_so_restore_works(tmp_path):
    state, target = tmp_path / "state", tmp_path / "app.conf"
    target.write_text("by hand\n")
    os.chmod(target, 0o640)
    doc = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "local"},
        "spec": {"selector": {}, "files": [{"path": str(target), "content": "declared\n"}]},
    }
    cs = tmp_path / "cs.yaml"
    cs.write_text(yaml.safe_dump(doc))
    applied = nm("apply", "-f", str(cs), "--state-dir", str(state))
    assert applied.returncode == 0, applied.stderr
    assert target.read_text() == "declared\n"
    restored = nm("restore", str(target), "--state-dir", str(state))
    assert restored.returncode == 0, restored.stderr
    assert target.read_text() == "by hand\n" and stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    "fixture, labels, path",
    [
        ("secret-refs.yaml", "role=app", "/etc/app/secret.conf"),
        ("notify-all.yaml", "role=jailhost", "/etc/jail.conf.d/base"),
    ],
)
def test_upstreams_documented_objects_apply_check_unchanged(fixture, labels, path, tmp_path):
    """apply --check of upstream's shapes (tests/fixtures/upstream), read as they are: each
    selects by its labels, would change its file, and changes nothing."""
    upstream = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / fixture
    checked = nm("apply", "--check", "-f", str(upstream), "--node-labels", labels)
    assert checked.returncode == 0, checked.stderr
    assert "0 ok, 1 would change, 0 failed" in checked.stdout
    assert "s3cret-canary" not in checked.stdout + checked.stderr
    assert not os.path.exists(path)
