"""The harness that runs the tutorials (nbmake on nbclient), as the root conftest.py sets it up."""

from __future__ import annotations

from typing import Any

import nbformat
from nbclient import NotebookClient

CELLS = [
    "import ipywidgets as W\nfrom IPython.display import display\nout = W.Output()\ndisplay(out)",
    "for i in range(20):\n    with out:\n        print(i)",
]


def test_output_widgets_are_captured_without_echoing_on_the_shell_socket() -> None:
    """An echo on the shell socket races the cell's execute_reply and can stall the cell until its
    timeout (conftest.py ``_no_output_widget_echo``): the client sends requests there, nothing else."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS])
    client = NotebookClient(nb, timeout=60, kernel_name="python3")
    sent: list[str] = []
    with client.setup_kernel():
        shell = client.kc.shell_channel
        original = shell.send

        def spy(msg: dict[str, Any]) -> None:
            sent.append(msg["header"]["msg_type"])
            original(msg)

        shell.send = spy
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)

    assert "execute_request" in sent
    assert [kind for kind in sent if not kind.endswith("_request")] == []
    captured = [state.get("outputs") for state in client.widget_state.values() if state.get("outputs")]
    assert captured and "".join(o["text"] for o in captured[0]) == "".join(f"{i}\n" for i in range(20))
