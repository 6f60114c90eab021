"""Totals per account and overall."""
from collections import defaultdict
from decimal import Decimal


def by_account(rows):
    totals = defaultdict(Decimal)
    for account, amount in rows:
        totals[account] += Decimal(amount)
    return dict(totals)


def total(rows):
    return sum(by_account(rows).values(), Decimal(0))


def summary(rows):
    lines = ["%-10s %10s" % (a, t) for a, t in sorted(by_account(rows).items())]
    lines.append("%-10s %10s" % ("total", total(rows)))
    return "\n".join(lines)
