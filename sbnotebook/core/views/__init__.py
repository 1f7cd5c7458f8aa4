"""Records and the views made of them.

``records.py`` is the one record schema (a message as a flat dict); ``search.py`` selects records by
body and properties, and ``where.py`` says what a ``where`` could not evaluate; ``signatures.py``
groups dead-letter reasons by shape (counting a dead-letter queue by those shapes reads the entity:
``operations/triage.py``); ``routing.py`` evaluates a topic's rules on records (the broker's
evaluator, ``sbnotebook.sqlrules``) and ``routes.py`` is what ``core.route`` answers.
"""
