"""The size units the tool knows and their factors in bytes."""

UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
}


def factor(unit):
    """Bytes in one `unit` (a key of UNITS)."""
    try:
        return UNITS[unit]
    except KeyError:
        raise ValueError("unknown unit %r" % unit) from None
