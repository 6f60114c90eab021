import os
from decimal import Decimal

from ledger import reader, report

DATA = os.path.join(os.path.dirname(__file__), "data")


def test_march_totals():
    rows = reader.read_file(os.path.join(DATA, "march.csv"))
    assert report.by_account(rows) == {"rent": Decimal("1000.00"), "food": Decimal("400.00")}
    assert report.total(rows) == Decimal("1400.00")


def test_summary_lists_accounts():
    rows = [["b", "1.50"], ["a", "2.00"]]
    assert report.summary(rows).splitlines()[0].startswith("a ")
