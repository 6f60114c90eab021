from pricing import price


def test_price_in_euros():
    assert price("A1") == 1000


def test_price_in_dollars():
    assert price("A1", currency="EUR") == 1000
    assert price("A1", currency="USD") == 1100
    assert price("B2", currency="GBP") == 2168
