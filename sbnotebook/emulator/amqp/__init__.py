"""The AMQP 1.0 face of the broker, on python-qpid-proton.

``handler.py`` the proton handler (connections, links, transfers); ``attach.py`` links attached
(receivers, sessions, senders) and detached; ``terms.py`` what it keeps per connection and link;
``control.py`` the ``$cbs`` and ``$management`` links; ``management.py`` the ``$management``
operations; ``rules.py`` subscription rules in the request-response encoding; ``connlimits.py`` the
connection cap and idle deadlines on whole connections; ``deliver.py`` messages out by link credit;
``settle.py`` dispositions onto settlement; ``codec.py`` and ``sections.py`` messages between proton
and the broker.
"""
