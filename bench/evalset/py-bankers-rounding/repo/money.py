"""Money amounts for invoices, as Decimals with two places."""
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def round_cents(amount):
    """`amount` (a Decimal, int or str) rounded to whole cents."""
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP)


def line_total(unit_price, quantity, vat_rate):
    """A line's total with VAT, rounded once at the end."""
    net = Decimal(unit_price) * quantity
    return round_cents(net * (1 + Decimal(vat_rate)))


def split(total, parts):
    """`total` split into `parts` amounts that add up to it exactly."""
    share = round_cents(Decimal(total) / parts)
    shares = [share] * (parts - 1)
    shares.append(Decimal(total) - sum(shares))
    return shares
