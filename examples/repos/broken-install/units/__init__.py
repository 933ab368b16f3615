"""Unit conversions. A valid package: its environment is what is broken (see the manifest)."""

_TO_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048}


def convert(value, src, dst):
    try:
        return value * _TO_METRES[src] / _TO_METRES[dst]
    except KeyError as exc:
        raise ValueError(f"unknown unit {exc.args[0]!r}") from None
