"""The benchmarks' own memory readings, of the process that calls them (Linux)."""

from __future__ import annotations

import resource


def rss_mb() -> float:
    """Resident memory now, MB (the peak where /proc is not there)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_mb()


def peak_mb() -> float:
    """The most resident memory this process has held, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
