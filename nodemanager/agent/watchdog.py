"""Fencing, agent side: a hardware (or softdog) watchdog petted while the API server answers.

The Linux watchdog protocol: opening the device arms it; each write is a keepalive; if none
comes within the device's timeout the machine resets. Writing ``V`` just before closing
("magic close") disarms it; closing without it leaves it armed (the host reboots). The agent
writes a keepalive every ``interval`` while its last successful Lease renewal is younger than
``timeout``, so a host cut off from the API server reboots, and the controller may then delete
its pods and Node. It disarms on a clean shutdown and while the node is in maintenance.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
KEEPALIVE = b"\0"
MAGIC_CLOSE = b"V"


class Watchdog:
    """Owns the device file descriptor; ``renewed()`` is called after each successful Lease
    renewal, ``run`` pets the device from its own thread."""

    def __init__(
        self,
        path: str,
        timeout: float,
        interval: float,
        *,
        maintenance: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.timeout, self.interval = path, timeout, interval
        self.maintenance, self.clock = maintenance, clock
        self._fd: int | None = None
        self._last_renewal = clock()
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        return self._fd is not None

    def renewed(self) -> None:
        self._last_renewal = self.clock()

    def step(self) -> bool:
        """One round: arm, pet, or disarm. Whether a keepalive was written."""
        with self._lock:
            if self.maintenance():
                self._disarm("maintenance")
                return False
            if self.clock() - self._last_renewal > self.timeout:
                # Stop petting but stay armed: the device resets the host.
                log.error("API server unanswered for %.0fs: watchdog not petted", self.timeout)
                return False
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY)
                log.warning("watchdog %s armed", self.path)
            os.write(self._fd, KEEPALIVE)
            return True

    def _disarm(self, why: str) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, MAGIC_CLOSE)
        finally:
            os.close(self._fd)
            self._fd = None
        log.warning("watchdog %s disarmed (%s)", self.path, why)

    def disarm(self) -> None:
        """Clean shutdown: magic close."""
        with self._lock:
            self._disarm("shutdown")

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.step()
            except OSError as e:
                log.error("watchdog %s: %s", self.path, e)
            stop.wait(self.interval)
        self.disarm()
