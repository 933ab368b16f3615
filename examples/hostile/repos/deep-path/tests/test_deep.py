"""Leaves a folder chain deeper than PATH_MAX (4096 bytes) in the results folder: copying it back
to the host fails. The failure must be the unit's, short, and name no host path."""
import os


def test_deep_tree():
    fd = os.open("/worldline/out", os.O_RDONLY)
    for _ in range(20):
        os.mkdir("d" * 250, dir_fd=fd)
        inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
