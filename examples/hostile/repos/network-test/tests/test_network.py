"""Tries the host's loopback service (port from HOSTILE_PORT) and the package mirror from a test."""
import os
import socket


def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError:
        return False


def test_no_network():
    port = int(os.environ["HOSTILE_PORT"])
    assert not reach("127.0.0.1", port), "a test reached the host's loopback"
    assert not reach("deb.debian.org", 80), "a test reached the package mirror"
