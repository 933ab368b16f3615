"""Passes only when the .pth the build planted got nothing that looks like the report key."""
import builtins
import re


def test_pth_ran():
    assert hasattr(builtins, "worldline_stolen"), "the planted .pth did not run"


def test_key_out_of_reach():
    assert not re.fullmatch(rb"[0-9a-f]{64}", builtins.worldline_stolen), "a .pth read the report key"
