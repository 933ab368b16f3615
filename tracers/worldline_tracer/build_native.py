"""Compile the C accelerator for the Python that runs this script: _native.c into the module
_worldline_native and _episodes.c into _worldline_episodes. ``python build_native.py OUT_DIR``
writes OUT_DIR/<module><EXT_SUFFIX> for each and prints their paths, one a line.
The base images run it at build time (into their site-packages: tracers/ is mounted read-only and
shared by every Python version); tests run it into a temporary folder. Standard library only, and
no setuptools: the images have gcc and the Python headers only while they build."""
import os
import subprocess
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))
# module name -> its C source (native.py imports them by these names)
MODULES = {"_worldline_native": "_native.c", "_worldline_episodes": "_episodes.c"}


def build(out_dir, cc="gcc"):
    """Compiles every module into out_dir; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    targets = []
    for module, source in MODULES.items():
        target = os.path.join(out_dir, module + sysconfig.get_config_var("EXT_SUFFIX"))
        # warnings are shown, not fatal: another Debian's gcc must not fail an image build over one
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wall", "-I", include, os.path.join(_HERE, source),
                        "-o", target], check=True)
        targets.append(target)
    return targets


if __name__ == "__main__":
    print("\n".join(build(sys.argv[1])))
