"""A griffe extension (mkdocs.yml) that shows a function made from another as the function it is.

``copy = sync_form(acopy)`` reads, to griffe, as a value with no parameters; at run time it is a
function with ``acopy``'s (sbnotebook/core/connections/syncforms.py). Once a module's members are
read, each such assignment (``reference_check.made_from``) becomes a function entry with the
parameters of the function it was made from and the docstring and return type of the one that
documents it, so the reference shows what help() shows.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))  # reference_check, beside this file
from reference_check import made_from


class MadeFunctions(griffe.Extension):
    """Each ``name = maker(operation, ...)`` of a module becomes a function entry (the module docstring)."""

    def on_module_members(self, *, node: ast.AST | griffe.ObjectNode, mod: griffe.Module, **kwargs: Any) -> None:
        if not isinstance(node, ast.Module):
            return  # read by inspection, not from the source: nothing to show differently
        for statement in node.body:
            made = made_from(statement)
            if made is None:
                continue
            name, takes, documented = made
            mod.set_member(name, _function(mod, statement, name, mod.members[takes], mod.members[documented]))


def _function(mod: griffe.Module, statement: ast.stmt, name: str, source: Any, documented: Any) -> griffe.Function:
    parameters = griffe.Parameters(
        *(
            griffe.Parameter(p.name, annotation=p.annotation, kind=p.kind, default=p.default, docstring=p.docstring)
            for p in source.parameters
        )
    )
    made = griffe.Function(
        name,
        lineno=statement.lineno,
        endlineno=statement.end_lineno,
        parameters=parameters,
        returns=documented.returns,
        parent=mod,
    )
    doc = documented.docstring
    if doc is not None:
        made.docstring = griffe.Docstring(
            doc.value,
            lineno=doc.lineno,
            endlineno=doc.endlineno,
            parent=made,
            parser=doc.parser,
            parser_options=doc.parser_options,
        )
    return made
