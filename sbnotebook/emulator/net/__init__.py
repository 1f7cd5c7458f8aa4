"""The network: bytes in and out of the emulator's one port, all on the event loop's thread.

``loop.py`` the event loop around proton's engine; ``frontdoor.py`` a new connection until its
protocol is known (AMQP, WebSocket or HTTP by its first bytes); ``tlsio.py`` TLS ended in memory
on the loop; ``peerio.py`` a peer's state and bytes; ``sequencing.py`` gives proton transfers in
order (``amqpvalues.py`` where an encoded AMQP value ends); ``websocket.py`` AMQP over WebSockets;
``limits.py`` the connection cap and the deadlines for stalled peers; ``protonprivate.py`` the list
of proton's private names the emulator uses.
"""
