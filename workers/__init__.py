"""The task entrypoint: Celery app, tasks, beat schedule."""
