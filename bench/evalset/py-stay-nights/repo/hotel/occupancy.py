"""Which rooms are taken on a night."""
from hotel.calendar import iter_days


def occupied(bookings, night):
    """The rooms booked for `night`; bookings are (room, check_in, check_out)."""
    return sorted({room for room, check_in, check_out in bookings if night in set(iter_days(check_in, check_out))})
