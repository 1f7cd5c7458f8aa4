"""What ``%sb_route TOPIC FRAME`` costs as a user runs it: a DataFrame variable of 10^4 records (the
records of ``route_cost.py``: typed properties, some missing) routed through a topic of 20
subscriptions and 50 rules on the embedded emulator, read through its administration API, in an
IPython shell with the extension loaded; the magic's printed lines and the DataFrame it returns
included. Reports each round's wall seconds and the best (a shared machine's other work only adds).

Target (issue 71): under 2 s.

    python benchmarks/route_magic.py [--messages 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd
from IPython.core.interactiveshell import InteractiveShell

from benchmarks.route_cost import records
from sbnotebook.core.sdk.admin import emulator_admin_client
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import load_ipython_extension
from tests.core.topology.routed_topic import make_topic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with Emulator() as emu:
        with emulator_admin_client(emu.connection_string) as admin:
            make_topic(admin, "bench")
        shell = InteractiveShell.instance()
        load_ipython_extension(shell)
        shell.run_line_magic("sb_connect", emu.connection_string)
        shell.user_ns["frame"] = pd.DataFrame(records(args.messages))
        walls = []
        for _ in range(args.rounds):
            out = io.StringIO()
            started = time.perf_counter()
            with contextlib.redirect_stdout(out):
                result = shell.run_line_magic("sb_route", "bench frame")
            walls.append(time.perf_counter() - started)
        lines = out.getvalue().count("\n")
        print(
            f"%sb_route bench frame: {args.messages} messages, {len(result):,} rows, {lines} lines printed; "
            f"wall per round {', '.join(f'{w:.2f}' for w in walls)} s, best {min(walls):.2f} s"
        )


if __name__ == "__main__":
    main()
