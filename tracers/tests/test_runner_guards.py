"""The key holder's own checks (tracers/worldline_runs.py), on the host: what counts as a file mapped
from outside our interpreter's tree, and which file each signed line is bound to."""
import hashlib
import hmac
import json

import worldline_runs

MEMORY = worldline_runs._memory_device()


def maps_line(path, dev):
    return "7f0000000000-7f0000001000 r-xp 00000000 %s 1234                       %s\n" % (dev, path)


def test_a_file_the_image_names_memfd_is_foreign():
    lines = [
        maps_line("/worldline/py/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "00:3a"),
        maps_line("/memfd:libffi (deleted)", MEMORY),
        maps_line("/dev/zero (deleted)", MEMORY),
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0                          [heap]\n",
        # A provider a hostile openssl.cnf named, from a folder of the image called /memfd:x.
        maps_line("/memfd:x/provider.so", "00:3a"),
        maps_line("/usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so", "00:3a"),
    ]
    assert worldline_runs._foreign_mappings(lines, MEMORY) == ["/memfd:x/provider.so", "/usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so"]


def test_this_process_maps_memfds_on_the_memory_device():
    import ctypes  # noqa: F401  (libffi's trampolines, where it makes them)

    with open("/proc/self/maps") as f:
        lines = f.readlines()
    memfds = [line for line in lines if "/memfd:" in line]
    assert all(line.split(None, 5)[3] == MEMORY for line in memfds)


def test_each_signed_line_names_its_file():
    key = b"k" * 32
    line = worldline_runs.signer(key, "report-1.jsonl")({"event": "start"})
    mac, body = line.rstrip("\n").split(" ", 1)
    assert json.loads(body) == {"event": "start", "seq": 0, "file": "report-1.jsonl"}
    assert hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest())
