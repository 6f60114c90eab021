from decimal import Decimal as D

from money import round_cents, split


def test_more_half_cents():
    assert round_cents("2.665") == D("2.66")
    assert round_cents("2.675") == D("2.68")
    assert round_cents("-0.125") == D("-0.12")
    assert round_cents("0.1251") == D("0.13")


def test_split_of_a_half_cent_share():
    assert split("0.25", 2) == [D("0.12"), D("0.13")]
