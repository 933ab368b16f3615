"""Installs the repository itself into an environment image, editable and offline, for Worldline.

Run by the build (as root, no network, in /repo) as `python3 /worldline/lib/worldline_install.py
PLAN_JSON`, for an environment Worldline inferred (a manifest's own `env` is left as written). A
project that is never installed has no `*.dist-info`: `importlib.metadata.version()` and entry
points fail (click, jsonschema; 386 of markdown's tests need its entry points), and the version
file setuptools-scm or hatch-vcs writes at build time is missing (humanize, filelock,
prettytable). The plan (worked out on the host from the repository's files, never by running
them) says:
  {"name": "click", "version": "8.2.2.dev3", "root": "/repo/src",
   "version_files": [{"path": "src/x/_version.py", "text": "..."}],
   "entry_points": {"console_scripts": {"x": "x.cli:main"}}, "backend": true}
1. The version files are written where absent: the backend would have written them from git,
   which the image has no history of.
2. With `backend`, pip installs the project editable through its own build backend (Debian's
   python3-pip and the backend's package, installed with the other packages): no index, no
   dependencies, no build isolation, the version given to setuptools-scm/hatch-vcs, classifiers
   newer than Debian's hatchling knows not refused.
3. When that fails, or there is no backend to use, the metadata is written directly: a `.pth`
   putting the import root on sys.path and a `<name>-<version>.dist-info` with METADATA and
   entry_points.txt, as an editable install leaves them.
Prints one JSON line: {"method": "backend" | "metadata", "why": ..., "dist_info": ...}.
Standard library only; Python 3.8+.
"""
import json
import os
import re
import subprocess
import sys
import sysconfig

# Debian 12's pip needs the permission to install beside Debian's packages; bullseye's (20.3, the
# 3.9 base) knows no such option and stops at the flag, but ignores the variable (PIP_BREAK_SYSTEM_PACKAGES).
PIP_FLAGS = ["--no-index", "--no-deps", "--no-build-isolation", "--ignore-installed", "--no-cache-dir"]


def _normalized(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def write_version_files(plan):
    for vf in plan.get("version_files", []):
        path = os.path.join("/repo", vf["path"])
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(vf["text"])


def with_backend(plan):
    """(True, None) once pip installed the project through its backend; (False, why) otherwise."""
    env = dict(os.environ, SETUPTOOLS_SCM_PRETEND_VERSION=plan["version"], HATCH_METADATA_CLASSIFIERS_NO_VERIFY="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_BREAK_SYSTEM_PACKAGES="1")
    proc = subprocess.run([sys.executable, "-m", "pip", "install"] + PIP_FLAGS + ["-e", "/repo"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd="/repo")
    out = proc.stdout.decode("utf-8", "replace")
    sys.stderr.write(out)
    if proc.returncode == 0:
        return True, None
    errors = [line.strip() for line in out.splitlines() if re.search(r"(Error|error):", line)]
    return False, (errors[-1] if errors else "pip exited %d" % proc.returncode)[:300]


def with_metadata(plan):
    """The files an editable install leaves: a .pth for the import root and the dist-info."""
    site = sysconfig.get_paths()["purelib"]
    os.makedirs(site, exist_ok=True)
    name, version = plan["name"], plan["version"]
    with open(os.path.join(site, "__worldline_editable__.%s.pth" % _normalized(name)), "w") as f:
        f.write(plan["root"] + "\n")
    dist_info = os.path.join(site, "%s-%s.dist-info" % (_normalized(name), version))
    os.makedirs(dist_info, exist_ok=True)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        "INSTALLER": "worldline\n",
        "direct_url.json": json.dumps({"url": "file:///repo", "dir_info": {"editable": True}}) + "\n",
        "entry_points.txt": "".join(
            "[%s]\n%s\n" % (group, "".join("%s = %s\n" % item for item in sorted(points.items())))
            for group, points in sorted(plan.get("entry_points", {}).items())),
    }
    for file, text in files.items():
        with open(os.path.join(dist_info, file), "w") as f:
            f.write(text)
    with open(os.path.join(dist_info, "RECORD"), "w") as f:
        f.write("".join("%s/%s,,\n" % (os.path.basename(dist_info), file) for file in sorted(files) + ["RECORD"]))
    return dist_info


def main(plan):
    write_version_files(plan)
    why = "no build backend of the project's in the image"
    if plan.get("backend"):
        done, why = with_backend(plan)
        if done:
            return {"method": "backend", "why": None, "dist_info": None}
    return {"method": "metadata", "why": why, "dist_info": with_metadata(plan)}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
