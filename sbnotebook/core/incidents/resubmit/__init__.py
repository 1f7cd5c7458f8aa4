"""A resubmit (and a discard): messages moved, copy first then complete, each batch whole.

- ``api.py``: ``core.resubmit`` and ``core.aresubmit``, their arguments checked, their record
  named, their canary's fate read; ``discard.py``: ``core.discard``, a resubmit without the copy
  (the selected messages removed for good);
- ``run.py``: one run (a discard's and a purge window's too): its workers started and ended, the
  brake beside them, what is left, its Report;
- ``workers.py``: its workers, each batch moved whole;
- ``progress.py``: what a run that did not finish leaves for the next; ``selection.py``: what its
  ``where`` selects.
"""
