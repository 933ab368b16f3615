import pytest

from units import convert


def test_km_to_m():
    assert convert(2, "km", "m") == 2000.0


def test_feet_to_inches():
    assert convert(1, "ft", "in") == pytest.approx(12.0)


def test_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit 'yd'"):
        convert(1, "yd", "m")
