"""A small memoizing decorator for pure functions."""
import functools


def memoize(fn):
    """`fn` with its results kept by its arguments; `.cache` is the store."""
    cache = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = args
        if key not in cache:
            cache[key] = fn(*args, **kwargs)
        return cache[key]

    wrapper.cache = cache
    return wrapper
