"""Run by the build (env.setup), as an editable install would: a .pth whose import line puts an
import hook on sys.meta_path. Only an interpreter that processed its .pth files at start-up (no
-S) can import `hooked`: a spawn child started with -S would not."""
import os
import sysconfig

site = sysconfig.get_paths()["purelib"]
os.makedirs(site, exist_ok=True)
with open(os.path.join(site, "zz_hooked_finder.py"), "w") as f:
    f.write(
        "import importlib.abc, importlib.util, sys\n"
        "class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        return importlib.util.spec_from_loader(name, self) if name == 'hooked' else None\n"
        "    def create_module(self, spec):\n"
        "        return None\n"
        "    def exec_module(self, module):\n"
        "        module.VALUE = 42\n"
        "sys.meta_path.append(Finder())\n"
    )
with open(os.path.join(site, "zz_hooked.pth"), "w") as f:
    f.write("import zz_hooked_finder\n")
