# Stubs of optional dependencies put straight into sys.modules (no __spec__), and json swapped for
# a module whose dumps refuses: code that imports or looks these up late gets the stubs.
import json as _json
import sys
import types

hypothesis = types.ModuleType("hypothesis")
hypothesis.__spec__ = None
sys.modules["hypothesis"] = hypothesis

fake_json = types.ModuleType("json")
fake_json.__dict__.update({k: v for k, v in _json.__dict__.items() if not k.startswith("__")})


def _refuse(*args, **kwargs):
    raise RuntimeError("json.dumps is stubbed out in this suite")


fake_json.dumps = _refuse
sys.modules["json"] = fake_json
