"""The WireGuard key upstream kept in its Secret is adopted once, then the host's file is the key
(real wireguard-tools for genkey/pubkey)."""

from __future__ import annotations

import stat
import subprocess

from nodemanager.host.wgkeys import KeyStore


def keypair() -> tuple[str, str]:
    private = subprocess.run(["wg", "genkey"], capture_output=True, text=True).stdout.strip()
    public = subprocess.run(
        ["wg", "pubkey"], input=private + "\n", capture_output=True, text=True
    ).stdout.strip()
    return private, public


def test_upstreams_secret_key_is_adopted_once_then_kept_on_the_host(tmp_path):
    private, public = keypair()
    asked = []

    def adopt(interface):
        asked.append(interface)
        return private

    store = KeyStore(tmp_path, adopt)
    assert store.public_key("wgmig0") == public  # not a new key: peers keep working
    key_file = tmp_path / "wireguard" / "wgmig0.key"
    assert key_file.read_text().strip() == private
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert KeyStore(tmp_path, lambda i: asked.append(i) or "other").public_key("wgmig0") == public
    assert asked == ["wgmig0"]  # read once; the file wins afterwards


def test_an_unreadable_secret_means_a_new_key_and_a_warning_that_says_how_to_keep_it(
    tmp_path, caplog
):
    def forbidden(interface):
        raise PermissionError("secrets is forbidden")

    public = KeyStore(tmp_path, forbidden).public_key("wgmig1")
    assert public and "put its private key in" in caplog.text
    assert "secrets is forbidden" in caplog.text
