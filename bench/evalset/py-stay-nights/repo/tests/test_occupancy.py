from datetime import date

from hotel import occupancy

BOOKINGS = [(101, date(2024, 3, 4), date(2024, 3, 7)), (102, date(2024, 3, 5), date(2024, 3, 6))]


def test_rooms_taken_mid_stay():
    assert occupancy.occupied(BOOKINGS, date(2024, 3, 5)) == [101, 102]
