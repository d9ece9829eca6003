"""The agent's log while the API server is unreachable: no urllib3 retry noise (it was most of
the lines), and timestamps that carry the zone. A real agent process; the API server address
is a closed port."""

from __future__ import annotations

import json
import re
import socket

import yaml

from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


def test_unreachable_api_logs_without_retry_noise_and_with_zones(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "gone",
                        "cluster": {
                            "server": f"https://127.0.0.1:{closed_port()}",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "gone", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    agent = Agent(str(kubeconfig), "nodemanager", "offline-host", tmp_path / "state")
    agent.argv[agent.argv.index("--log-format") + 1] = "json"
    agent.start()
    try:
        eventually(lambda: "cannot register" in agent.log(), timeout=60)
        # The informers' retries are logged too (and must not bring urllib3's noise along).
        eventually(
            lambda: agent.log().count("list/watch failed") >= 2, timeout=60, message="a retry"
        )
    finally:
        agent.stop()
    lines = [json.loads(line) for line in agent.log().splitlines() if line.startswith("{")]
    assert lines
    assert not [x for x in lines if "Retrying (Retry(" in x["msg"]], "urllib3 retry noise"
    assert not [x for x in lines if x["logger"].startswith("urllib3")]
    zone = re.compile(r"T\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$")
    assert all(zone.search(x["time"]) for x in lines), lines[0]["time"]
