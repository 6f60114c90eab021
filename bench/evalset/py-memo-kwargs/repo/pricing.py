"""Prices of the catalogue in a currency."""
from memo import memoize

BASE_EUR = {"A1": 1000, "B2": 2550}
RATES = {"EUR": 1.0, "USD": 1.1, "GBP": 0.85}


@memoize
def price(sku, currency="EUR"):
    """The price of `sku` in cents of `currency`."""
    return round(BASE_EUR[sku] * RATES[currency])
