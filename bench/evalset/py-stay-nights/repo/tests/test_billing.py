from datetime import date

from hotel import billing


def test_three_weeknights():
    # Monday 4 March to Thursday 7 March 2024: three nights
    assert billing.price(date(2024, 3, 4), date(2024, 3, 7), 100) == 300


def test_weekend_surcharge():
    # Friday 8 March to Sunday 10 March: Friday and Saturday nights
    assert billing.price(date(2024, 3, 8), date(2024, 3, 10), 100) == 240
