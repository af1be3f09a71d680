"""Free TCP ports on the loopback interface, for servers started on this machine."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS's choice); the caller binds it soon after."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
