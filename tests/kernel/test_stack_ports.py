"""free_port (mirrors server/persona_service/process/stack.py): a port is
bound once and handed over, never checked and released, so that concurrent
test sessions cannot both take it."""

from __future__ import annotations

import socket

import pytest
from persona_service.process.stack import free_port


@pytest.mark.parametrize("offsets", [(), (1, 1000, 1001)])
def test_a_handed_out_port_stays_taken_until_its_listener_binds(offsets):
    port = free_port(*offsets)
    for taken in (port + offset for offset in (0, *offsets)):
        # Another session's free_port (a bind without SO_REUSEADDR) cannot take it...
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", taken))
        # ...while the listener it was handed to binds it (listeners set SO_REUSEADDR).
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", taken))
            listener.listen()
