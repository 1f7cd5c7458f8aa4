"""Records and the views made of them.

``records.py`` is the one record schema (a message as a flat dict); ``search.py`` selects records by
body and properties; ``signatures.py`` groups dead-letter reasons by shape; ``triage.py`` counts a
dead-letter queue by reason at any size.
"""
