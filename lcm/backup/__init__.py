"""Backups of an embedded (SQLite) home and their restore."""

from lcm.backup.sqlite import (
    BackupReport,
    RestoreReport,
    backup_home,
    postgres_commands,
    restore_home,
)

__all__ = ["BackupReport", "RestoreReport", "backup_home", "postgres_commands", "restore_home"]
