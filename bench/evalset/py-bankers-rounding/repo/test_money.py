# Expected values are taken from the accounting system's export
# (ledger 2024-Q1); it rounds half a cent to the even cent.
from decimal import Decimal as D

from money import line_total, round_cents, split


def test_whole_cents_unchanged():
    assert round_cents("12.30") == D("12.30")


def test_half_cent_rounds_to_even():
    assert round_cents("0.125") == D("0.12")
    assert round_cents("0.135") == D("0.14")


def test_line_total():
    # 2 x 10.25 at 10% VAT = 22.55 exactly
    assert line_total("10.25", 2, "0.10") == D("22.55")
    # 1 x 0.25 at 10% VAT = 0.275: half a cent
    assert line_total("0.25", 1, "0.10") == D("0.28")
    # 1 x 0.05 at 50% VAT = 0.075: half a cent
    assert line_total("0.05", 1, "0.5") == D("0.08")
    # 1 x 0.45 at 50% VAT = 0.675
    assert line_total("0.45", 1, "0.5") == D("0.68")
    # 1 x 1.25 at 10% VAT = 1.375
    assert line_total("1.25", 1, "0.10") == D("1.38")
    # 1 x 0.85 at 50% VAT = 1.275
    assert line_total("0.85", 1, "0.5") == D("1.28")
    # 1 x 0.75 at 10% VAT = 0.825
    assert line_total("0.75", 1, "0.10") == D("0.82")


def test_split_adds_up():
    parts = split("10.00", 3)
    assert parts == [D("3.33"), D("3.33"), D("3.34")]
    assert sum(parts) == D("10.00")
