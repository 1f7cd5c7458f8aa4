"""Parts of ``benchmarks/emulator_load.py``: the emulator process and what it holds (``process.py``),
raw peers that open and then stay quiet or stall (``peers.py``), and the SDK clients' work
(``clients.py``)."""
