"""Sizes as people write them: 512, 10KB, 1.5 GiB (units in any case)."""
import re

from .units import factor

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text):
    """Bytes in `text`; ValueError when it is not a size."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError("not a size: %r" % text)
    number, unit = m.groups()
    unit = unit.lower() or "b"
    return int(float(number) * factor(unit))
