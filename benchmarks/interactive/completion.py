"""Tab completion of ``%sb_peek`` through a real IPython shell's completer, cold and warm (issue 40;
interactive_latency.py prints it against its targets)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from sbnotebook import core

from .calls import median_ms


def completion(cs: str, repeat: int) -> dict[str, Any]:
    """Tab completion through a real IPython shell's completer: median ms cold (the name cache
    emptied before each Tab) and warm, and whether the cold Tab already offered the names. Each
    administration request is timed (the SDK's HTTP transport, wrapped): a cold Tab's requests
    rounds (a request that starts after another one it waited for ended is a second round) and its
    local time (the Tab less the slowest request it waited for: reading the feeds, IPython)."""
    import warnings

    import azure.core.pipeline.transport._requests_basic as transport
    from IPython.core.completer import provisionalcompleter
    from IPython.core.interactiveshell import InteractiveShell

    from sbnotebook.notebook import load_ipython_extension

    warnings.simplefilter("ignore")
    shell = InteractiveShell.instance()
    magics = load_ipython_extension(shell)
    shell.run_line_magic("sb_connect", cs)
    text = "%sb_peek d"

    def tab() -> list[str]:
        with provisionalcompleter():
            return [c.text for c in shell.Completer.completions(text, len(text))]

    names = magics.completer.names_of(magics.conn())
    deadline = time.monotonic() + 30
    while not names.top(wait=0)[0] and time.monotonic() < deadline:  # %sb_connect listed them
        time.sleep(0.05)
    requests: list[tuple[float, float]] = []  # (start, end) of each administration request
    real_send = transport.RequestsTransport.send

    def timed(self: Any, request: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_send(self, request, **kwargs)
        finally:
            requests.append((t0, time.perf_counter()))

    transport.RequestsTransport.send = timed  # type: ignore[method-assign]
    cold_ms, named, rounds, local = [], 0, [], []
    try:
        for _ in range(repeat):
            magics.completer.names.clear()
            requests.clear()
            t0 = time.perf_counter()
            offered = tab()
            t1 = time.perf_counter()
            cold_ms.append((t1 - t0) * 1000)
            named += offered != ["d"]
            waited = sorted(r for r in requests if r[1] <= t1)  # the requests that ended within the Tab
            first_end = min((end for _, end in waited), default=t1)
            rounds.append(1 + sum(1 for start, _ in waited if start >= first_end) if waited else 0)
            local.append((t1 - t0 - max((end - start for start, end in waited), default=0.0)) * 1000)
            time.sleep(0.3)  # the background listing (and its subscriptions) ends before the next
    finally:
        transport.RequestsTransport.send = real_send  # type: ignore[method-assign]
    tab()
    out = {
        "cold": statistics.median(cold_ms),
        "cold named": named,
        "repeat": repeat,
        "rounds": max(rounds),
        "requests": len(waited),
        "local": statistics.median(local),
    }
    out["warm"] = median_ms(tab, repeat)
    core.close_all()
    return out
