"""What a stay costs."""
from hotel.calendar import iter_days

WEEKEND_SURCHARGE = 20  # per Friday or Saturday night


def nights(check_in, check_out):
    return list(iter_days(check_in, check_out))


def price(check_in, check_out, nightly):
    total = 0
    for night in nights(check_in, check_out):
        total += nightly
        if night.weekday() in (4, 5):
            total += WEEKEND_SURCHARGE
    return total
