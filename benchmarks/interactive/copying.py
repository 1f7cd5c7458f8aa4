"""``%sb_copy``'s core.copy between two emulators against export + import of the same messages, and
the memory it holds (issue 40; interactive_latency.py prints it against its targets)."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

from sbnotebook import core


def copy_vs_files(cs: str, target_cs: str, n: int, tmp: Any, repeat: int) -> dict[str, Any]:
    """core.copy of n messages from one emulator to another, and export + import of the same,
    ``repeat`` times in turn (each copy paired with the export + import just before it); then the
    copy's memory on one more pass, traced."""
    src = core.connect(cs, warm=False)
    dst = core.connect(target_cs, warm=False)
    source, target = "copy-source", "copy-target"
    core.create_entity(source, kind="queue", connection=src)
    core.create_entity(target, kind="queue", connection=dst)
    core.send(source, ({"i": i, "pad": "x" * 900} for i in range(n)), connection=src).raise_for_failures()
    out: dict[str, Any] = {"export": [], "import": [], "copy": [], "held": [], "held bytes": []}
    file = tmp / "copy.jsonl"
    for _ in range(repeat):
        file.unlink(missing_ok=True)
        t0 = time.perf_counter()
        assert core.export_jsonl(source, file, connection=src) == n
        out["export"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        core.import_jsonl(target, file, connection=dst).raise_for_failures()
        out["import"].append(time.perf_counter() - t0)
        core.purge(target, connection=dst)
        t0 = time.perf_counter()
        report = core.copy(source, target, source_connection=src, connection=dst)
        out["copy"].append(time.perf_counter() - t0)
        assert report.count("sent") == n and core.counts(target, connection=dst).active == n
        out["held"].append(report.stats["peak_held"])
        out["held bytes"].append(report.stats["peak_held_bytes"])
        core.purge(target, connection=dst)
    tracemalloc.start()
    core.import_jsonl(target, file, connection=dst).raise_for_failures()
    out["import peak MiB"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    core.purge(target, connection=dst)
    tracemalloc.start()  # memory on a pass of its own: tracing slows Python too much to time it
    report = core.copy(source, target, source_connection=src, connection=dst)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report.raise_for_failures()
    out["copy peak MiB"] = peak / 2**20
    # What the copy held while it ran, beyond what it returns: the Report keeps up to MAX_DETAILS
    # outcomes (about 0.3 KB each), which grows with the copy, not with what is in flight.
    out["copy working MiB"] = (peak - kept) / 2**20
    out["held"].append(report.stats["peak_held"])
    out["copy report MiB"] = kept / 2**20
    tracemalloc.start()
    page = next(iter(core.scan(source, connection=src)))
    out["one page MiB"] = tracemalloc.get_traced_memory()[0] / 2**20
    del page
    tracemalloc.stop()
    core.close_all()
    return out
