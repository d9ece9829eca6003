"""Fencing, agent side: a hardware (or softdog) watchdog petted while the Lease is renewed.

The Linux watchdog protocol: opening the device arms it; each write is a keepalive; if none
comes within the device's timeout the machine resets. Writing ``V`` just before closing
("magic close") disarms it; closing without it (a killed agent) leaves it armed.

The agent opens the device only while its ManagedNode has ``spec.fencing.enabled``, and only
after a first successful Lease renewal. It writes a keepalive every ``interval`` while its
last successful renewal is younger than ``spec.fencing.timeoutSeconds``; after that none (the
device stays open: the host resets), and it resumes when a renewal succeeds again (the
controller fences only after the Lease's duration on top, by which time a reset host is down,
and a host whose renewal got through is not fenced). It disarms (magic close) when fencing is
switched off, while the maintenance annotation is set, and on a clean shutdown (``close``,
after which it never arms again).

On open it sets the device's own timeout (WDIOC_SETTIMEOUT) and refuses a device that keeps
one at or above ``max_timeout`` (below the Lease duration: the host must be down before the
controller deletes its pods). A FIFO is accepted in place of the device, for tests: it has no
timeout and nothing resets the host, which the agent logs.
"""

from __future__ import annotations

import array
import fcntl
import logging
import os
import stat
import threading
import time
from collections.abc import Callable

from nodemanager.api.fencing import ARMED, DEVICE_ERROR, DISABLED, IN_MAINTENANCE, UNANSWERED

log = logging.getLogger(__name__)
KEEPALIVE = b"\0"
MAGIC_CLOSE = b"V"
# linux/watchdog.h: _IOWR('W', 6, int) and _IOR('W', 7, int)
WDIOC_SETTIMEOUT, WDIOC_GETTIMEOUT = 0xC0045706, 0x80045707


class DeviceError(Exception):
    """The device cannot be armed safely (missing, not a watchdog, timeout too long)."""


class Watchdog:
    """Owns the device file descriptor. ``renewed()`` after each successful Lease renewal;
    ``step`` once per interval from one thread; ``close`` on shutdown from any thread."""

    def __init__(
        self,
        path: str,
        *,
        device_timeout: int,
        max_timeout: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.wanted_timeout, self.max_timeout = path, device_timeout, max_timeout
        self.clock = clock
        self.device_timeout: int | None = None  # as the device reported it; None: a FIFO
        self.error = ""  # why the device could not be armed (status, logs)
        self._fd: int | None = None
        self._last_renewal: float | None = None
        self._closed = False
        self._unanswered = False  # logged once per outage
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        return self._fd is not None

    def renewed(self) -> None:
        self._last_renewal = self.clock()

    def step(self, enabled: bool, timeout: float, maintenance: bool) -> str:
        """One round: arm, pet, hold back or disarm. The state, a status.fencing reason."""
        with self._lock:
            if self._closed or not enabled:
                self._disarm("fencing disabled")
                return DISABLED
            if maintenance:
                self._disarm("maintenance")
                return IN_MAINTENANCE
            last = self._last_renewal
            if last is None or self.clock() - last > timeout:
                if last is not None and not self._unanswered and self.armed:
                    log.error("Lease not renewed for %.0f s: watchdog no longer petted", timeout)
                self._unanswered = True
                return UNANSWERED  # never arm a device that would not be petted
            if self._unanswered and self.armed:
                log.warning("Lease renewed again: watchdog petted again")
            self._unanswered = False
            try:
                if self._fd is None:
                    self._fd = self._open()
                    self.error = ""
                os.write(self._fd, KEEPALIVE)
            except (OSError, DeviceError) as e:
                self.error = str(e)
                self._drop()
                log.error("watchdog %s: %s", self.path, e)
                return DEVICE_ERROR
            return ARMED

    def close(self) -> None:
        """Clean shutdown: magic close, and never arm again."""
        with self._lock:
            self._closed = True
            self._disarm("shutdown")

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode):
            log.warning("watchdog %s is a FIFO, not a device: nothing resets this host", self.path)
            self.device_timeout = None
        elif not stat.S_ISCHR(mode):
            os.close(fd)
            raise DeviceError(f"{self.path} is not a watchdog device")
        else:
            try:
                self.device_timeout = self._set_timeout(fd)
            except (OSError, DeviceError):
                _magic_close(fd)
                raise
        log.warning("watchdog %s armed (device timeout %s s)", self.path, self.device_timeout)
        return fd

    def _set_timeout(self, fd: int) -> int:
        buf = array.array("i", [self.wanted_timeout])
        try:
            fcntl.ioctl(fd, WDIOC_SETTIMEOUT, buf, True)
        except OSError as e:  # some devices have a fixed timeout: then it must be short enough
            log.warning("watchdog %s: cannot set its timeout (%s)", self.path, e)
        fcntl.ioctl(fd, WDIOC_GETTIMEOUT, buf, True)
        if not 0 < buf[0] <= self.max_timeout:
            raise DeviceError(
                f"{self.path} keeps a timeout of {buf[0]} s; at most {self.max_timeout} s is "
                "safe (the controller fences after the Lease expired)"
            )
        return buf[0]

    def _disarm(self, why: str) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            _magic_close(fd)
        except OSError as e:
            log.error("watchdog %s: magic close failed (%s): it stays armed", self.path, e)
            return
        log.warning("watchdog %s disarmed (%s)", self.path, why)

    def _drop(self) -> None:
        """A failed write: close without magic (the device stays armed), reopen next round."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


def _magic_close(fd: int) -> None:
    try:
        os.write(fd, MAGIC_CLOSE)
    finally:
        os.close(fd)
