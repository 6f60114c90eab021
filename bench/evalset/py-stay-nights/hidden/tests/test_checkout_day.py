from datetime import date

from hotel import calendar, occupancy

BOOKINGS = [(101, date(2024, 3, 4), date(2024, 3, 7))]


def test_iter_days_excludes_the_end():
    assert list(calendar.iter_days(date(2024, 3, 4), date(2024, 3, 6))) == [date(2024, 3, 4), date(2024, 3, 5)]
    assert list(calendar.iter_days(date(2024, 3, 4), date(2024, 3, 4))) == []


def test_room_free_on_the_checkout_night():
    assert occupancy.occupied(BOOKINGS, date(2024, 3, 7)) == []
    assert occupancy.occupied(BOOKINGS, date(2024, 3, 6)) == [101]
