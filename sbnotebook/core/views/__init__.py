"""Records and the views made of them.

``records.py`` is the one record schema (a message as a flat dict); ``search.py`` selects records by
body and properties, and ``where.py`` says what a ``where`` could not evaluate; ``signatures.py``
groups dead-letter reasons by shape (counting a dead-letter queue by those shapes reads the entity:
``operations/triage.py``). Routing a record through a topic's rules is in ``core/topology/``.
"""
