from memo import memoize
import pricing


def test_keywords_are_part_of_the_key():
    calls = []

    @memoize
    def scaled(x, *, factor=1):
        calls.append(x)
        return x * factor

    assert scaled(2, factor=3) == 6
    assert scaled(2, factor=5) == 10
    assert scaled(2, factor=3) == 6
    assert len(calls) == 2


def test_price_stays_memoized():
    pricing.price("A1", currency="GBP")
    assert hasattr(pricing.price, "cache") and len(pricing.price.cache) >= 1
