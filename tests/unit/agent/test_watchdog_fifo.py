"""The watchdog keepalive protocol against a FIFO in place of /dev/watchdog (this kernel has no
softdog): keepalives while renewals are fresh, none once the API went unanswered past the
timeout (the device stays open: armed), magic close 'V' on shutdown and in maintenance."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from nodemanager.agent.watchdog import Watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reader(fifo: Path) -> tuple[threading.Thread, bytearray]:
    got = bytearray()

    def read() -> None:
        with open(fifo, "rb", buffering=0) as f:
            while chunk := f.read(1):
                got.extend(chunk)

    t = threading.Thread(target=read)
    t.start()
    return t, got


def test_fifo_keepalives_stop_when_api_unanswered_and_magic_close_on_shutdown(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "watchdog"
    os.mkfifo(fifo)
    t, got = reader(fifo)
    clock = Clock()
    dog = Watchdog(str(fifo), timeout=30, interval=5, clock=clock)
    assert not dog.armed
    for _ in range(3):
        assert dog.step()
        clock.now += 5
    assert dog.armed
    dog.renewed()
    clock.now += 31  # no renewal for longer than the timeout
    assert not dog.step() and not dog.step()
    assert dog.armed  # still open: the device will reset the host
    dog.renewed()
    assert dog.step()  # the API answered again
    dog.disarm()
    t.join(timeout=10)
    assert bytes(got) == b"\0\0\0\0V"
    assert not dog.armed


def test_fifo_magic_close_while_in_maintenance_and_rearm_after(tmp_path: Path) -> None:
    fifo = tmp_path / "watchdog"
    os.mkfifo(fifo)
    t, got = reader(fifo)
    maintenance = [False]
    dog = Watchdog(str(fifo), timeout=30, interval=5, maintenance=lambda: maintenance[0])
    assert dog.step()
    maintenance[0] = True
    assert not dog.step() and not dog.armed
    t.join(timeout=10)
    assert bytes(got) == b"\0V"
    t, got = reader(fifo)
    maintenance[0] = False
    assert dog.step() and dog.armed
    stop = threading.Event()
    stop.set()
    dog.run(stop)  # a stopping agent disarms
    t.join(timeout=10)
    assert bytes(got) == b"\0V"
