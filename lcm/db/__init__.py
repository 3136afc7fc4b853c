"""Persistence: models, engines, migrations."""
