"""The PSI reader: this machine's real /proc/pressure, and the kernel's format rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodemanager.host.pressure import PROC_PRESSURE, PressureError, parse, read_pressure


@pytest.mark.skipif(not PROC_PRESSURE.is_dir(), reason="this kernel has no PSI")
def test_reads_this_machines_proc_pressure() -> None:
    sample = read_pressure()
    assert sample is not None and "memory" in sample and "cpu" in sample and "io" in sample
    memory = sample["memory"]
    assert memory.full is not None  # memory always has a full line
    for avg in (memory.some, memory.full, sample["cpu"].some, sample["io"].some):
        assert 0.0 <= avg.avg10 <= 100.0 and 0.0 <= avg.avg300 <= 100.0


def test_no_pressure_directory_is_none_not_zeros(tmp_path: Path) -> None:
    assert read_pressure(tmp_path / "absent") is None
    assert read_pressure(tmp_path) is None  # a directory with no resource files


def test_cpu_without_full_line_as_before_linux_5_13() -> None:
    p = parse("cpu", "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\n")
    assert p.some.avg10 == 1.5 and p.some.avg60 == 0.25 and p.full is None


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("some avg10=x avg60=0 avg300=0 total=0\n")
    with pytest.raises(PressureError, match=r"memory: not a PSI line: 'some avg10=x"):
        read_pressure(tmp_path)
