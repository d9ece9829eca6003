"""The watchdog keepalive protocol against a FIFO in place of /dev/watchdog (this kernel has no
softdog), on a test clock: no arming before a Lease renewal, keepalives while renewals are
fresh, none once the API went unanswered past the timeout (the device stays open: armed),
again after a renewal, magic close 'V' on shutdown, when switched off and in maintenance."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodemanager.agent.watchdog import Watchdog
from nodemanager.api.fencing import ARMED, DEVICE_ERROR, DISABLED, IN_MAINTENANCE, UNANSWERED
from tests.watchdog_fifo import FifoWatchdog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[FifoWatchdog]:
    r = FifoWatchdog(tmp_path / "watchdog")
    yield r
    r.stop()


def dog(path: Path, clock: Clock) -> Watchdog:
    return Watchdog(str(path), device_timeout=8, max_timeout=30, clock=clock)


def test_fifo_keepalives_stop_when_api_unanswered_resume_and_magic_close_on_shutdown(fifo):
    clock = Clock()
    d = dog(fifo.path, clock)
    assert d.step(True, 30, False) == UNANSWERED and not d.armed  # no renewal yet: not armed
    d.renewed()
    for _ in range(3):
        assert d.step(True, 30, False) == ARMED
        clock.now += 2
    assert d.armed and d.device_timeout is None  # a FIFO has no timeout of its own
    clock.now += 25  # 31 s since the renewal: past the timeout
    assert d.step(True, 30, False) == UNANSWERED and d.step(True, 30, False) == UNANSWERED
    assert d.armed  # still open: the device would reset the host
    d.renewed()
    assert d.step(True, 30, False) == ARMED  # the API answered again
    d.close()
    assert fifo.wait_closed(1)
    assert fifo.data() == b"\0\0\0\0V"
    assert not d.armed
    d.renewed()
    assert d.step(True, 30, False) == DISABLED and not d.armed  # closed: never again


def test_fifo_magic_close_in_maintenance_and_when_switched_off_then_rearm(fifo):
    d = dog(fifo.path, Clock())
    d.renewed()
    assert d.step(True, 30, False) == ARMED
    assert d.step(True, 30, True) == IN_MAINTENANCE and not d.armed
    assert fifo.wait_closed(1)
    assert fifo.data() == b"\0V"
    assert d.step(True, 30, False) == ARMED and d.armed  # maintenance over: armed again
    assert d.step(False, 30, False) == DISABLED and not d.armed
    assert fifo.wait_closed(2)
    assert fifo.data() == b"\0V\0V"


def test_without_a_reader_the_fifo_cannot_arm_and_is_retried(tmp_path):
    path = tmp_path / "watchdog"
    os.mkfifo(path)
    d = dog(path, Clock())
    d.renewed()
    assert d.step(True, 30, False) == DEVICE_ERROR and not d.armed  # ENXIO: nobody reads
    assert "No such device" in d.error
    r = FifoWatchdog(path, made=True)
    try:
        assert d.step(True, 30, False) == ARMED
        d.close()
        assert r.wait_closed(1)
        assert r.data() == b"\0V"
    finally:
        r.stop()


def test_a_regular_file_is_not_a_watchdog_and_gets_nothing(tmp_path):
    path = tmp_path / "watchdog"
    path.write_bytes(b"")
    d = dog(path, Clock())
    d.renewed()
    assert d.step(True, 30, False) == DEVICE_ERROR and not d.armed
    assert "is not a watchdog device" in d.error
    assert path.read_bytes() == b""


def test_a_missing_device_is_a_device_error(tmp_path):
    d = dog(tmp_path / "absent", Clock())
    d.renewed()
    assert d.step(True, 30, False) == DEVICE_ERROR and "No such file" in d.error
