"""The operator console's reads and layouts (rendered by api/console)."""
