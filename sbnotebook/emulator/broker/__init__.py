"""The broker as a pure state machine: no sockets, no threads, an injected clock.

``broker.py`` the facade; ``brokercore.py`` its shared state and how a message moves; ``entities.py``
queues, topics, subscriptions; ``store.py`` one message log; ``model.py`` and ``values.py`` messages as
stored; ``locks.py`` peek locks; ``settlement.py`` complete, abandon, defer, dead-letter, renew;
``sessions.py`` and ``sessionlocks.py`` sessions; ``noting.py`` what the broker notes in a
message's journey (``journey/``); ``scheduling.py`` scheduled and deferred lookups;
``clock.py``, ``timers.py`` and ``firing.py`` what falls due when; ``faults.py`` fault injection;
``policies.py`` queues' and topics' shared access policies; ``status.py`` what a disabled entity refuses;
``rules.py`` subscription rules (which topic messages a subscription receives, its actions applied;
their SQL is ``sbnotebook/sqlrules/``, ``sqlview.py`` a message as it reads one, ``sqlvalues.py`` AMQP values in its
types); ``recorder.py`` what the broker tells the store that keeps it (``--data-dir``,
implemented by ``persistence/``).
"""
