"""The administration API (ATOM over HTTP): ``api.py`` the requests; ``handoff.py`` the HTTP
connections the AMQP port hands over, each served on a thread; ``entities.py`` creating and updating
entities from ``properties.py`` (what a description sets), ``limits.py`` (what Service Bus refuses)
and ``policyxml.py`` (shared access policies, Service Bus's ``AuthorizationRules``);
``documents.py`` and ``rulexml.py`` the entities' and subscription rules' XML; ``atom.py`` the ATOM
envelopes; ``clockroute.py`` the emulator's own ``/$emulator/clock`` (its time; a manual clock
advanced); ``journeyroute.py`` the emulator's own ``/$emulator/journey`` (one message's journey
through the broker, as JSON)."""
