"""The harness that runs the tutorials (nbmake on nbclient), as the root conftest.py sets it up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbmake import nb_run

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


def test_tutorial_kernels_talk_over_unix_sockets_from_the_notebooks_folder(tmp_path: Path) -> None:
    """A TCP port that jupyter_client found free can be taken by another process before the kernel
    binds it (conftest.py ``_kernels_over_ipc``). nbmake starts the kernel in the notebook's folder,
    not the repository's: the socket paths must not depend on the folder."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nprint(os.getcwd())")])
    client = nb_run.NotebookClient(nb, timeout=60, kernel_name="python3")
    with client.setup_kernel(cwd=str(tmp_path)):
        info = client.km.get_connection_info()
        client.execute_cell(nb.cells[0], 0)

    assert info["transport"] == "ipc" and os.path.isabs(info["ip"])
    assert nb.cells[0].outputs[0]["text"].strip() == str(tmp_path)
