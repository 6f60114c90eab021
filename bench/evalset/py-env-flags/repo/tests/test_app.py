from svc import app


def test_defaults():
    assert app.banner({}) == "svc: production mode, 4 workers, metrics on"


def test_debug_on():
    assert app.settings({"SVC_DEBUG": "1"})["debug"] is True


def test_debug_off_in_deployment():
    env = {"SVC_DEBUG": "false", "SVC_WORKERS": "8", "SVC_METRICS": "off"}
    assert app.banner(env) == "svc: production mode, 8 workers, metrics off"
