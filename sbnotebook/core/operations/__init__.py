"""The operations an analyst runs one at a time: peek, scan, receive, settle, send, manage.

- Reading without locks: ``peek.py`` (the public peeks), ``scan.py`` (the one way to page through an
  entity), ``bounds.py`` (where an entity begins and ends, by sequence number and time),
  ``window.py`` and ``window_search.py`` (an enqueued-time window: its sequence numbers found, then
  scanned), ``triage.py`` (a dead-letter queue counted by reason at any size, over ``scan.py``),
  ``journey.py`` (one message's journey: the embedded emulator's record of it, or on Azure what the
  message carries), ``tail.py`` (a live tail, by peeking).
- Locks: ``receive.py`` (peek-lock and receive-and-delete), ``batch.py`` (a locked batch and its
  settlement), ``deferral.py`` (the four ways to try later), ``process.py`` (settle after the work),
  ``sessions.py`` (list sessions, their state).
- Sending: ``send.py`` (the public forms), ``pipeline.py`` (batches under the size limit, at most N in
  flight), ``messages.py`` (what a caller hands in, as SDK messages), ``typed.py`` (a message's body
  and properties as they are sent again, each with its AMQP type), ``copies.py`` (one message copied
  for resubmission, and the one "copy first, then complete" that deferral, process and the incident
  tools share).
- The namespace: ``manage.py`` (create, change, delete entities and rules), ``counts.py`` (runtime
  counts through the administration API).
"""
