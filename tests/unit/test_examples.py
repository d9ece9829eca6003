"""Every example parses, and the templated ones render with realistic node data."""

import base64
from pathlib import Path

import pytest

from nodemanager.agent.sources import load
from nodemanager.api import ConfigSet, Node
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import TemplateData, render_templates

ROOT = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(ROOT.rglob("*.yaml"))
STATUS = {
    "interfaces": {"eth0": {"ipv4": ["10.0.0.2"], "ipv6": ["fd00::2"]}},
    "sshHostKeys": [{"algorithm": 4, "fingerprintType": 2, "fingerprint": "ab" * 32}],
    "wireGuard": [{"name": "wg0", "publicKey": "PUBKEY=", "listenPort": 51820}],
}
NODES = (
    Node("db1", {"wireguard/address": "10.10.0.2/32"}, STATUS),
    Node("web1", {"role": "dns"}, STATUS),
)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses_and_renders(path):
    loaded = load([str(path)])
    configsets = [ConfigSet.from_dict(raw, strict=True) for raw in loaded.snapshot.configsets]
    assert loaded.errors == [] and configsets
    secrets = loaded.snapshot.secrets
    data = TemplateData(
        NODES[1],
        NODES,
        secrets={k: {kk: base64.b64encode(b"x").decode() for kk in v} for k, v in secrets.items()},
    )
    _, contents, failures = render_templates(merge(configsets), data)
    assert failures == {}
    if path.name == "hosts-from-nodes.yaml":
        assert "10.0.0.2 db1 db1.eth0" in contents["/etc/hosts"].text
    if path.name == "wireguard-peers.yaml":
        text = contents["/etc/wireguard/wg0.conf"].text
        assert (
            "# db1" in text
            and "Endpoint = 10.0.0.2:51820" in text
            and "web1" not in text.split("[Peer]")[0][20:]
        )
    if path.name == "sshfp-records.yaml":
        assert f"db1. IN SSHFP 4 2 {'ab' * 32}" in contents["/etc/bind/sshfp.zone"].text


def test_a_directory_holds_only_local_examples():
    """`render -f examples/` reads only the local examples: the cluster ones (templates over
    every node) would cut this host's /etc/hosts down to localhost without a cluster."""
    loaded = load([str(ROOT)])
    assert loaded.errors == []
    assert {cs["metadata"]["name"] for cs in loaded.snapshot.configsets} == {"chrony", "demo"}
    cluster = load([str(ROOT / "cluster")])
    assert {"hosts", "sshfp-zone"} <= {cs["metadata"]["name"] for cs in cluster.snapshot.configsets}
