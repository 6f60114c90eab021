"""Day arithmetic for bookings."""
from datetime import timedelta

ONE_DAY = timedelta(days=1)


def iter_days(start, end):
    """The days from `start` up to, not including, `end` (dates)."""
    day = start
    while day <= end:
        yield day
        day += ONE_DAY


def overlaps(a_start, a_end, b_start, b_end):
    """Whether the stays [a_start, a_end) and [b_start, b_end) share a night."""
    return a_start < b_end and b_start < a_end
