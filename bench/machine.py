"""How busy the machine is, and with what (Linux ``/proc``; elsewhere nothing is read).

Every figure of a scenario depends on the cores it gets. A process left
running from earlier work (a busy loop, a forgotten benchmark) takes one
without a trace in the figures, which then read as "a slower machine".
:func:`report_before` looks for a second before each scenario and names what
was running then.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
NOTABLE = 0.1  # of a core: a process using less is not named


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (``/proc/stat``); zeros elsewhere."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values) - idle) / TICKS, sum(values) / TICKS


def process_cpu(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used; 0 if it is gone (or not on Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass(frozen=True)
class Busy:
    """What a look at the machine saw: its busy share and the processes behind it."""

    share: float  # of all the machine's CPU time, 0..1
    cores: int
    processes: list[tuple[int, str, float]]  # (pid, command line, cores used), busiest first


def look(seconds: float = 1.0, exclude: int | None = None) -> Busy | None:
    """Watch the machine for ``seconds``; ``None`` where ``/proc`` is not there.

    ``exclude`` (default: this process) is left out of the processes named.
    """
    exclude = os.getpid() if exclude is None else exclude
    busy_before, total_before = machine_busy()
    if total_before == 0:
        return None
    before = _every_process()
    time.sleep(seconds)
    busy_after, total_after = machine_busy()
    after = _every_process()
    share = (busy_after - busy_before) / max(total_after - total_before, 1e-9)
    used = [
        (pid, _command(pid), (cpu - before[pid]) / seconds)
        for pid, cpu in after.items()
        if pid in before and pid != exclude
    ]
    notable = sorted((p for p in used if p[2] >= NOTABLE), key=lambda p: -p[2])
    return Busy(share, os.cpu_count() or 1, notable)


def report_before() -> str:
    """One line for a scenario's output: how busy the machine was just before it."""
    seen = look()
    if seen is None:
        return "  machine before the run: not measured (no /proc)"
    line = f"  machine before the run: {seen.share:.0%} busy over 1 s ({seen.cores} cores)"
    if seen.processes:
        named = "; ".join(f"{pid} {cmd} {cores:.0%}" for pid, cmd, cores in seen.processes[:3])
        line += f"; busiest, in shares of a core: {named}"
    return line


def _every_process() -> dict[int, float]:
    return {int(e): process_cpu(int(e)) for e in os.listdir("/proc") if e.isdigit()}


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:80] or "?"
