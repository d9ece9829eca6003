"""status.fileBackups in upstream's shape (a map path -> sha256) keeps what was stored."""

from __future__ import annotations

from nodemanager.agent.hostfeatures import STATUS_BACKUPS_KEPT_MAX, backups_status
from nodemanager.host.backups import Version

A, B, C = "a" * 64, "b" * 64, "c" * 64


def v(sha: str, at: float, secret: bool = False) -> Version:
    return Version(sha, at, 0o644, 0, 0, "root", "root", secret=secret)


def test_ours_as_a_map_and_upstreams_records_read_back_not_overwritten():
    index = {"/etc/ours": [v(A, 1.0)], "/etc/both": [v(B, 2.0)]}
    prior = {"/etc/upstream-only": C, "/etc/both": C}  # upstream's updateFileBackups wrote these
    assert backups_status(index, prior) == {
        "/etc/ours": A,
        "/etc/both": B,  # our newer backup of the same path wins
        "/etc/upstream-only": C,
    }


def test_secret_fed_paths_are_never_listed_and_a_stored_digest_of_one_is_removed():
    index = {"/etc/token": [v(A, 1.0, secret=True)]}
    assert backups_status(index, {"/etc/token": C, "/etc/x": B}) == {
        "/etc/token": None,  # a JSON merge patch removes it
        "/etc/x": B,
    }


def test_the_earlier_list_shape_and_junk_read_back_as_nothing():
    index = {"/etc/ours": [v(A, 1.0)]}
    assert backups_status(index, [{"path": "/etc/ours", "sha256": A}]) == {"/etc/ours": A}
    assert backups_status(index, {"/etc/bad": 3}) == {"/etc/ours": A, "/etc/bad": None}


def test_bounded():
    prior = {f"/p{i:04}": C for i in range(STATUS_BACKUPS_KEPT_MAX + 5)}
    out = backups_status({}, prior)
    assert sum(v is not None for v in out.values()) == STATUS_BACKUPS_KEPT_MAX
    assert len(out) == len(prior)  # the rest removed explicitly


def test_a_stored_digest_of_a_path_declared_secret_fed_now_is_removed():
    """Upstream listed Secret-fed files like any other; this agent knows which are."""
    stored = {"/etc/app/secret.conf": C, "/etc/plain": B}
    assert backups_status({}, stored, secret={"/etc/app/secret.conf"}) == {
        "/etc/app/secret.conf": None,
        "/etc/plain": B,
    }


def test_a_secret_fed_file_made_absent_keeps_its_digest_out_of_status(tmp_path):
    """The plan that removes it no longer says Secret-fed; the agent remembers it was, across
    a restart too (issue 37: the digest of the Secret's content reached status)."""
    import hashlib

    from nodemanager.agent.hostfeatures import HostFeatures
    from nodemanager.api import ConfigSet
    from nodemanager.desired.merge import merge
    from nodemanager.playbook.build import build

    target, state = tmp_path / "token", str(tmp_path / "state")
    target.write_text("s3cret-token\n")
    digest = hashlib.sha256(b"s3cret-token\n").hexdigest()
    host = HostFeatures(state)
    out, _ = host.status({}, {}, full=False, secret={str(target)})  # the pass that wrote it
    assert str(target) not in out["fileBackups"]
    host = HostFeatures(state)  # a restart in between
    spec = {"files": [{"path": str(target), "ensure": "absent"}]}
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "c"}, "spec": spec})]), "debian", "n"
    )
    host.before_change(plan, {})([f"file:{target}"])
    (saved,) = host.backups.index()[str(target)]
    assert saved.secret and saved.sha256 == digest
    out, _ = host.status({"status": {"fileBackups": {str(target): digest}}}, {}, full=False)
    assert out["fileBackups"][str(target)] is None  # removed from the stored status
    assert digest not in repr(out)
