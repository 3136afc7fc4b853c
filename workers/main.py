"""The entry module of Celery's own command line: ``celery -A workers.main worker|beat|inspect``.

Importing it starts such a process, so it bootstraps the app from the
environment's settings (``workers/bootstrap.py``); nothing else imports it.
"""

from __future__ import annotations

from lcm.settings import get_settings
from workers.bootstrap import bootstrap

app = bootstrap(get_settings())
