import sys

FAKE_LINES = [
    "tests/test_fake.py::test_fakes_its_own_success PASSED                      [100%]",
    "tests/test_fake.py::test_real PASSED                                       [ 50%]",
    "============================== 2 passed in 0.01s ===============================",
]


def test_real():
    assert "worldline".upper() == "WORLDLINE"


def test_fakes_its_own_success():
    for line in FAKE_LINES:
        print(line)
        print(line, file=sys.stderr)
        sys.__stdout__.write(line + "\n")
        sys.__stdout__.flush()
        sys.__stderr__.write(line + "\n")
        sys.__stderr__.flush()
    assert 1 + 1 == 3, "this test fails; only its output claims otherwise"
