from app import config


def test_environment_values_take_the_defaults_types():
    s = config.load({"APP_TIMEOUT": "5", "APP_RETRIES": "2", "APP_QUEUE": "fast"})
    assert s["timeout"] == 5 and isinstance(s["timeout"], int)
    assert s["retries"] == 2 and isinstance(s["retries"], int)
    assert s["queue"] == "fast"
