import os
import subprocess
import time

from nodemanager.agent.cleanup import clean_runs, clean_temp_files, declared_paths
from nodemanager.fsutil import TEMP_MARK, write_atomic


def test_leftover_run_dirs_and_the_processes_in_them_are_removed(tmp_path):
    runs = tmp_path / "runs"
    left = runs / "nodemanager-run-x1" / "project"
    left.mkdir(parents=True)
    (left / "main.yml").write_text("secret: hunter2\n")
    env = {**os.environ, "NODEMANAGER_RUN_DIR": str(runs / "nodemanager-run-x1")}
    proc = subprocess.Popen(["sleep", "60"], cwd="/", env=env)
    try:
        assert clean_runs(runs) == 1
        assert proc.wait(10) == -9  # killed, not left writing
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(runs.iterdir()) == [] and oct(runs.stat().st_mode & 0o777) == "0o700"
    assert clean_runs(runs) == 0


def test_temp_files_beside_declared_files_are_removed(tmp_path):
    target = tmp_path / "app.conf"
    write_atomic(target, b"ok")
    assert [p.name for p in tmp_path.iterdir()] == ["app.conf"]  # the real one leaves none
    stray = tmp_path / f".app.conf{TEMP_MARK}q1w2e3r4"
    stray.write_text("half")
    other = tmp_path / ".app.conf.keep"
    other.write_text("not ours")
    paths = declared_paths([{"spec": {"files": [{"path": str(target)}]}}, {"spec": {}}])
    assert clean_temp_files(paths) == 1
    assert not stray.exists() and other.exists() and target.read_bytes() == b"ok"


def test_writer_thread_is_not_needed_to_import(tmp_path):
    # A smoke check that cleanup never needs the API: it runs before anything connects.
    started = time.monotonic()
    clean_runs(tmp_path / "fresh")
    assert time.monotonic() - started < 5 and os.path.isdir(tmp_path / "fresh")
