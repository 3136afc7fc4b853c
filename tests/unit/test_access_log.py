"""uvicorn's access lines are built only at a level that shows them (lcm.logs.access_logged)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from uvicorn.config import Config

from lcm.logs import access_logged


@pytest.fixture
def access_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("uvicorn.access")
    level, propagate, handlers = logger.level, logger.propagate, list(logger.handlers)
    yield logger
    logger.setLevel(level)
    logger.propagate = propagate
    logger.handlers[:] = handlers


@pytest.mark.parametrize(
    ("level", "shown"),
    [("DEBUG", True), ("INFO", True), ("WARNING", False), ("ERROR", False)],
)
def test_access_lines_are_on_exactly_where_their_level_shows(
    access_logger: logging.Logger, level: str, shown: bool
) -> None:
    access_logger.propagate = True  # as lcm.logs.configure_logging leaves it
    logging.getLogger().addHandler(handler := logging.NullHandler())
    try:
        Config(
            app="api.app:create_app",
            log_level=level.lower(),
            log_config=None,
            access_log=access_logged(level),
        )
        assert access_logged(level) is shown
        # uvicorn's HTTP protocol logs a request's line when this logger has a handler.
        assert access_logger.hasHandlers() is shown
        assert access_logger.isEnabledFor(logging.INFO) is shown
    finally:
        logging.getLogger().removeHandler(handler)
