"""The agent's fencing driver against a FIFO in place of the watchdog: it follows the own
ManagedNode (spec.fencing, the maintenance annotation), wakes the worker on each change, keeps
the gauge, and puts status.fencing in the status only once the node is or was fenced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from nodemanager.agent.fencing import FencingAgent
from nodemanager.agent.watchdog import Watchdog
from nodemanager.api.fencing import MAINTENANCE
from tests.watchdog_fifo import FifoWatchdog


def test_driver_follows_the_node_and_reports_in_status(tmp_path: Path) -> None:
    fifo = FifoWatchdog(tmp_path / "watchdog")
    node: dict[str, Any] = {"metadata": {"name": "n1"}, "spec": {}}
    changes: list[str] = []
    registry = CollectorRegistry()
    gauge = Gauge("armed", "", registry=registry)
    dog = Watchdog(str(fifo.path), device_timeout=8, max_timeout=30)
    agent = FencingAgent(dog, lambda: node, lambda: changes.append(agent.state), gauge)
    try:
        assert agent.interval == 2  # a quarter of the device timeout
        dog.renewed()
        assert agent.step() == "Disabled" and not changes
        assert agent.with_status({"release": "6.1"}, {}, node) == {"release": "6.1"}

        node["spec"] = {"fencing": {"enabled": True}}
        assert (
            agent.step() == "Armed"
            and changes == ["Armed"]
            and registry.get_sample_value("armed") == 1
        )
        assert agent.with_status({}, {}, node) == {
            "fencing": {"armed": True, "reason": "Armed", "deviceTimeoutSeconds": 0}
        }
        assert agent.step() == "Armed" and changes == ["Armed"]  # no change: no wake-up

        node["metadata"]["annotations"] = {MAINTENANCE: "x"}
        assert agent.step() == "Maintenance" and registry.get_sample_value("armed") == 0
        assert fifo.wait_closed(1) and fifo.data() == b"\0\0V"

        node["spec"], node["metadata"] = {}, {"name": "n1"}
        assert agent.step() == "Disabled" and changes == ["Armed", "Maintenance", "Disabled"]
        # Switched off: still said, since the status said it before.
        previous = {"fencing": {"armed": False, "reason": "Maintenance"}}
        assert agent.with_status({}, previous, node)["fencing"]["reason"] == "Disabled"
    finally:
        agent.close()
        fifo.stop()
