"""Each message's journey through the broker, kept so it can be asked, and told to OpenTelemetry.

``log.py`` the events (what happened, when, where, with which delivery count and lock) and the
bounded log the broker appends them to (the oldest dropped, and counted); ``queries.py`` one
message's events found in it (by message id, sequence number or trace id, followed through
forwarding and dead-lettering); ``spans.py`` a span per event when the process has OpenTelemetry
loaded and a tracer provider set (nothing imported otherwise); ``export.py`` the exporter the
``sbnotebook emulator`` process sets up from OpenTelemetry's standard environment; ``client.py`` a
running emulator's journey of a message asked from another process (``core.journey``) over its
administration API.

The broker (above it) calls it; of the rest of the emulator only ``client.py`` imports anything (the
key signing of ``security/``).
"""
