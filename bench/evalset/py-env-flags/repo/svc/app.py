"""The service's start-up settings."""
from svc.env import get_bool, get_int


def settings(environ=None):
    return {
        "debug": get_bool("SVC_DEBUG", False, environ),
        "workers": get_int("SVC_WORKERS", 4, environ),
        "metrics": get_bool("SVC_METRICS", True, environ),
    }


def banner(environ=None):
    s = settings(environ)
    mode = "debug" if s["debug"] else "production"
    return "svc: %s mode, %d workers, metrics %s" % (mode, s["workers"], "on" if s["metrics"] else "off")
