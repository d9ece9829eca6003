"""Upstream's file backups, made by upstream's own code, restored by ours.

Upstream's ``files.SaveToFileBucket`` (pkg/files/files.go, what its agent calls before it
overwrites a file with ``-configset.file-bucket.enabled``) is built from the vendored archive
into a small program and run on real files; `nodemanager restore --list/--hash` must list and
put back what it saved, and `--backup-max-age` collection removes it. About 5 s with a warm Go
build cache (2 min cold, at load ~20)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

import pytest

from tests.integration.helpers import nm
from tests.thirdparty import UPSTREAM, VENDOR

SAVER = """\
package main

import (
	"fmt"
	"os"

	"github.com/zachfi/nodemanager/pkg/files"
)

// saver BUCKET PATH...: back each PATH up as upstream's agent does before overwriting it.
func main() {
	for _, path := range os.Args[2:] {
		data, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			panic(err)
		}
		hash, err := files.SaveToFileBucket(os.Args[1], path, data, info)
		if err != nil {
			panic(err)
		}
		fmt.Println(hash)
	}
}
"""


@pytest.fixture(scope="module")
def saver(tmp_path_factory):
    archive = VENDOR / UPSTREAM.archive
    if not archive.exists():
        pytest.skip(f"upstream's source: {archive} is absent")
    if shutil.which("go") is None:
        pytest.skip("upstream's source: needs go to build")
    src = tmp_path_factory.mktemp("upstream")
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="tar")
    (module,) = [p for p in src.iterdir() if (p / "go.mod").exists()]
    (module / "cmd" / "fbsaver").mkdir(parents=True)
    (module / "cmd" / "fbsaver" / "main.go").write_text(SAVER)
    binary = src / "fbsaver"
    env = {**os.environ, "GOFLAGS": "-mod=vendor", "CGO_ENABLED": "0"}
    built = subprocess.run(
        ["go", "build", "-o", str(binary), "./cmd/fbsaver"],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stderr
    return binary


def test_restore_lists_and_puts_back_what_upstream_saved(saver, tmp_path):
    state = tmp_path / "state"
    conf = tmp_path / "app.conf"
    conf.write_text("upstream era\n")
    os.chmod(conf, 0o640)
    os.chown(conf, 65534, 65534)
    # upstream's default -configset.file-bucket.path lies in our default state dir
    saved = subprocess.run(
        [str(saver), str(state / "filebucket"), str(conf)], capture_output=True, text=True
    )
    assert saved.returncode == 0, saved.stderr
    sha = saved.stdout.strip()
    conf.write_text("ours now\n")
    os.chown(conf, 0, 0)

    listed = nm("restore", str(conf), "--list", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[0] == sha and " 0640 " in listed.stdout
    done = nm("restore", str(conf), "--hash", sha[:10], "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == "upstream era\n"
    assert (conf.stat().st_uid, conf.stat().st_gid, conf.stat().st_mode & 0o7777) == (
        65534,
        65534,
        0o640,
    )

    # Another path named as upstream's flag names it, and collected by age.
    other = tmp_path / "bucket"
    subprocess.run([str(saver), str(other), str(conf)], check=True, capture_output=True)
    named = nm("restore", str(conf), "--list", "--state-dir", str(tmp_path / "s2"),
               "--filebucket-path", str(other))  # fmt: skip
    assert named.returncode == 0 and sha in named.stdout, named.stderr
    from nodemanager.host.backups import BackupStore

    for blob in other.rglob("*"):
        if blob.is_file():
            os.utime(blob, (1, 1))
    assert BackupStore(tmp_path / "s2", filebucket=other).gc(3600) == 1
    assert not [p for p in other.rglob("*") if p.is_file()]
