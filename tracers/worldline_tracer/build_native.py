"""Compile _native.c into the module _worldline_native, for the Python that runs this script:
``python build_native.py OUT_DIR`` writes OUT_DIR/_worldline_native<EXT_SUFFIX> and prints its path.
The base images run it at build time (into their site-packages: tracers/ is mounted read-only and
shared by every Python version); tests run it into a temporary folder. Standard library only, and
no setuptools: the images have gcc and the Python headers only while they build."""
import os
import subprocess
import sys
import sysconfig

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native.c")
MODULE = "_worldline_native"


def build(out_dir, cc="gcc"):
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, MODULE + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    # warnings are shown, not fatal: another Debian's gcc must not fail an image build over one
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wall", "-I", include, SOURCE, "-o", target], check=True)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1]))
