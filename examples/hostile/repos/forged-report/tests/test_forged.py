def test_fails():
    assert 1 + 1 == 3
