"""Local ConfigSet files: a key repeated in one mapping is refused, as kubectl refuses it."""

from __future__ import annotations

from pathlib import Path

from nodemanager.agent import sources

HEAD = "apiVersion: common.nodemanager/v1\nkind: ConfigSet\nmetadata:\n  name: a\n"


def test_duplicate_key_is_an_error_naming_key_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + "spec:\n  files: []\n  files:\n  - path: /x\n")
    good = tmp_path / "good.yaml"
    good.write_text(HEAD.replace("name: a", "name: b") + "spec:\n  files: []\n")
    loaded = sources.load([str(tmp_path)])
    assert len(loaded.errors) == 1
    assert "bad.yaml" in loaded.errors[0]
    assert "duplicate key 'files' at line 7" in loaded.errors[0]
    # One bad file does not stop the rest.
    assert [c["metadata"]["name"] for c in loaded.snapshot.configsets] == ["b"]


def test_merge_keys_and_same_key_in_sibling_mappings_are_not_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "ok.yaml"
    f.write_text(
        HEAD + "base: &b {mode: '0644', owner: root}\n"
        "spec:\n  files:\n  - {<<: *b, path: /a, mode: '0600'}\n  - {<<: *b, path: /b}\n"
    )
    loaded = sources.load([str(f)])
    assert loaded.errors == []
    files = loaded.snapshot.configsets[0]["spec"]["files"]
    assert files[0]["mode"] == "0600" and files[1]["mode"] == "0644"
