"""Small helpers."""


def unique(items):
    """`items` without repeats, each kept where it first appears."""
    return list(set(items))


def slug(text):
    return "-".join(text.lower().split())
