"""Writes where a test should not: /etc, site-packages (a .pth that would run in every later
interpreter), HOME, and a setuid shell and a device node into the results folder."""
import os
import shutil
import site
import sysconfig

PTH = "import pathlib; pathlib.Path('/tmp/hostile-pth-ran').write_text('ran')\n"


def attempt(fn):
    try:
        fn()
        return True
    except OSError:
        return False


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_results_folder_is_nosuid_nodev():
    # Field 5 of /proc/self/mountinfo is the mount point, field 6 its per-mount options.
    options = [line.split()[5].split(",") for line in open("/proc/self/mountinfo") if line.split()[4] == "/worldline/out"]
    assert options, "/worldline/out is not a mount"
    assert "nosuid" in options[-1] and "nodev" in options[-1], options[-1]


def test_writes_outside_repo():
    # A .pth planted by an earlier run (user site or system site-packages) must never have run.
    assert not os.path.exists("/tmp/hostile-pth-ran"), "a planted .pth ran in a later interpreter"
    assert not attempt(lambda: write("/etc/hostile-marker", "x")), "/etc is writable"
    assert not attempt(lambda: write(os.path.join(sysconfig.get_paths()["purelib"], "hostile.pth"), PTH)), "site-packages is writable"
    attempt(lambda: write(os.path.join(site.getusersitepackages(), "hostile.pth"), PTH))
    attempt(lambda: write(os.path.expanduser("~/hostile-marker"), "x"))
    attempt(lambda: write("/root/hostile-marker", "x"))
    # Into the folder the host reads back: a setuid copy of the shell and a device node.
    out = "/worldline/out"
    if attempt(lambda: shutil.copy("/bin/sh", os.path.join(out, "rootshell"))):
        attempt(lambda: os.chmod(os.path.join(out, "rootshell"), 0o4755))
    assert not attempt(lambda: os.mknod(os.path.join(out, "null"), 0o666 | 0o020000, os.makedev(1, 3))), "mknod worked"
