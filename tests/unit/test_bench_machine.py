"""The benchmarks' look at the machine before a scenario (``bench/machine.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from bench.machine import look, report_before


def test_a_process_burning_a_core_is_named_with_its_share() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        seen = look(seconds=1.0)
        assert seen is not None
        named = {pid: cores for pid, _, cores in seen.processes}
        assert spinner.pid in named
        # A busy loop owns a core, less what the other processes of a shared
        # 2-core machine take from it in that second.
        assert named[spinner.pid] >= 0.3
        assert seen.share > 0
        named_in_report = report_before().split("; busiest, in shares of a core: ")[1]
        assert any(entry.startswith(f"{spinner.pid} ") for entry in named_in_report.split("; "))
    finally:
        spinner.kill()
        spinner.wait()


def test_the_benchmark_itself_is_not_named_however_busy() -> None:
    stop = time.monotonic() + 1.5

    def spin() -> None:
        while time.monotonic() < stop:
            pass

    burner = threading.Thread(target=spin)
    burner.start()
    try:
        seen = look(seconds=1.0)
    finally:
        burner.join()
    assert seen is not None
    assert seen.share > 0
    assert os.getpid() not in {pid for pid, _, _ in seen.processes}
