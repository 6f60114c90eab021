from app import config, scheduler


def test_deadline_default():
    job = scheduler.Job("build", 100.0)
    assert scheduler.deadline(job, config.load({})) == 130.0


def test_plan_with_timeout_from_environment():
    jobs = [scheduler.Job("build", 100.0), scheduler.Job("test", 200.0)]
    assert scheduler.plan(jobs, {"APP_TIMEOUT": "5"}) == [("build", 105.0), ("test", 205.0)]


def test_retries_from_environment():
    job = scheduler.Job("build", 0.0)
    settings = config.load({"APP_RETRIES": "1"})
    job.attempts = 1
    assert scheduler.should_retry(job, settings)
    job.attempts = 2
    assert not scheduler.should_retry(job, settings)
