"""Settings: the defaults, overridden by APP_<NAME> environment variables."""
import os

DEFAULTS = {
    "timeout": 30,  # seconds a job may run
    "retries": 3,  # attempts after the first
    "queue": "default",
}


def load(environ=None):
    """The settings as a dict: DEFAULTS, each overridden by APP_<NAME>."""
    environ = os.environ if environ is None else environ
    settings = dict(DEFAULTS)
    for name in DEFAULTS:
        value = environ.get("APP_" + name.upper())
        if value is not None:
            settings[name] = value
    return settings
