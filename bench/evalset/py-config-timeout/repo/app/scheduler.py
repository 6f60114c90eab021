"""When a job must end and whether it is tried again."""
from app import config


class Job:
    def __init__(self, name, started_at):
        self.name = name
        self.started_at = started_at
        self.attempts = 0


def deadline(job, settings):
    """The time by which `job` must be done."""
    return job.started_at + settings["timeout"]


def should_retry(job, settings):
    return job.attempts <= settings["retries"]


def plan(jobs, environ=None):
    settings = config.load(environ)
    return [(job.name, deadline(job, settings)) for job in jobs]
