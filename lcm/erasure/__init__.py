"""Erasing data: conversations, session families, tenants, and retention.

``service``: the erases, one transaction each, stored file contents removed
after commit. ``retention``: beat's sweep of conversations idle longer than a
tenant's ``retention_days``. ``repository``: all their SQL.
"""
