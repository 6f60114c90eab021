"""Typed reads of environment variables."""
import os


def get_int(name, default, environ=None):
    environ = os.environ if environ is None else environ
    value = environ.get(name)
    return default if value in (None, "") else int(value)


def get_bool(name, default, environ=None):
    """A yes/no setting: 1/0, true/false, yes/no, on/off (any case)."""
    environ = os.environ if environ is None else environ
    value = environ.get(name)
    if value in (None, ""):
        return default
    return bool(value)
