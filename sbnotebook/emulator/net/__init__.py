"""The network: bytes in and out of the emulator's one port.

``loop.py`` the event loop around proton's engine; ``frontdoor.py`` tells AMQP from HTTP by the first
bytes; ``peerio.py`` a peer's state and bytes; ``sequencing.py`` gives proton transfers in order;
``websocket.py`` AMQP over WebSockets; ``tlsrelay.py`` TLS per connection; ``protonprivate.py`` the
list of proton's private names the emulator uses.
"""
