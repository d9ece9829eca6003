"""MemoryPressure from a pressure directory the tests write (in place of /proc/pressure):
threshold from the flag or spec.pressure.memoryThreshold, status.pressure, the gauges."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from nodemanager.agent.metrics import Metrics
from nodemanager.agent.pressure import CONDITION, PressureMonitor, threshold

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def write_psi(d: Path, memory_avg10: float) -> None:
    d.mkdir(exist_ok=True)
    (d / "memory").write_text(
        f"some avg10={memory_avg10:.2f} avg60=3.40 avg300=1.00 total=99\n"
        "full avg10=0.50 avg60=0.10 avg300=0.00 total=9\n"
    )
    (d / "cpu").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def condition_of(status: dict) -> dict:  # type: ignore[type-arg]
    return next(c for c in status["conditions"] if c["type"] == CONDITION)


def test_pressure_dir_past_threshold_sets_memory_pressure_true(tmp_path: Path) -> None:
    m = Metrics(node="n1")
    mon = PressureMonitor(m.pressure, "n1", tmp_path)
    write_psi(tmp_path, 4.0)
    mon.poll()
    below = mon.with_status({"conditions": [{"type": "Ready"}]}, {}, 10.0, T0)
    assert condition_of(below)["status"] == "False"
    assert below["pressure"]["memory"] == {
        "some": {"avg10": 4, "avg60": 3, "avg300": 1},
        "full": {"avg10": 0, "avg60": 0, "avg300": 0},
    }
    assert "full" not in below["pressure"]["cpu"]
    assert [c["type"] for c in below["conditions"]] == ["Ready", CONDITION]

    write_psi(tmp_path, 25.5)
    mon.poll()
    above = mon.with_status({}, below, 10.0, T1)
    c = condition_of(above)
    assert (c["status"], c["reason"], c["lastTransitionTime"]) == ("True", "MemoryStalled", T1)
    assert "25.50% >= threshold 10%" in c["message"]
    assert mon.under_pressure(10.0) and not mon.under_pressure(30.0)
    # the same state keeps its transition time
    assert condition_of(mon.with_status({}, above, 10.0, "2026-01-02T00:00:00Z")) == c
    text = generate_latest(m.registry).decode()
    assert (
        'nodemanager_pressure_stall_percent{kind="some",node="n1",resource="memory",'
        'window="10s"} 25.5' in text
    )


def test_spec_threshold_overrides_flag() -> None:
    assert threshold({"pressure": {"memoryThreshold": 40}}, 10.0) == 40.0
    assert threshold({}, 10.0) == 10.0


def test_kernel_without_psi_is_unknown_and_publishes_nothing(tmp_path: Path) -> None:
    mon = PressureMonitor(Metrics(node="n").pressure, "n", tmp_path / "none")
    mon.poll()
    status = mon.with_status({}, {}, 10.0, T0)
    assert condition_of(status)["status"] == "Unknown" and "pressure" not in status
    assert not mon.under_pressure(0.0)


def test_early_oom_evicts_once_per_hold_from_a_written_pressure_dir(tmp_path: Path) -> None:
    from nodemanager.agent.earlyoom import EarlyOom, settings

    mon = PressureMonitor(Metrics(node="n").pressure, "n", tmp_path)
    spec = {"pressure": {"earlyOOM": {"enabled": True, "threshold": 40, "for": "30s"}}}
    evictions, events = [], []
    oom = EarlyOom(
        lambda: evictions.append(1) or ("ns/p", []),  # type: ignore[func-returns-value]
        lambda reason, message: events.append((reason, message)),
    )
    write_psi(tmp_path, 50.0)
    mon.poll()
    assert oom.tick(mon.memory_avg10(), None, 0.0) == ""  # not opted in
    assert oom.tick(mon.memory_avg10(), settings(spec), 0.0) == ""  # rose: the hold starts
    assert oom.tick(mon.memory_avg10(), settings(spec), 29.0) == ""
    assert oom.tick(mon.memory_avg10(), settings(spec), 30.0) == "ns/p"
    assert oom.tick(mon.memory_avg10(), settings(spec), 35.0) == ""  # one per hold
    write_psi(tmp_path, 5.0)
    mon.poll()
    assert oom.tick(mon.memory_avg10(), settings(spec), 61.0) == ""  # fell: the hold resets
    assert len(evictions) == 1
    assert events == [
        ("EarlyOOMEviction", "evicted pod ns/p: memory some avg10 50.00% >= 40% for 30s")
    ]
