"""Subscription rules: ``filters.py`` decides which topic messages a subscription receives;
``sqlfilter.py`` the SQL filter language, ``sqlaction.py`` the SQL actions."""
