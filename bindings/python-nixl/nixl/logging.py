"""nixl.logging: NIXL's logger hierarchy over Python's logging module.

get_logger("_api") is the logger "nixl.api" (leading underscores dropped, under "nixl"); the
"nixl" logger's level comes from NIXL_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR, CRITICAL) when
set. ixl's C library logs on its own (IXL_LOG_LEVEL, ixl.set_log_level).
"""
import logging as _logging
import os as _os

_configured = False


def set_log_level_by_env(nixl_logger):
    """Sets nixl_logger's level from NIXL_LOG_LEVEL, if set (a bad value: a warning, no
    change)."""
    value = _os.environ.get("NIXL_LOG_LEVEL")
    if not value:
        return
    level = getattr(_logging, value.upper(), None)
    if not isinstance(level, int):
        nixl_logger.warning("Invalid NIXL_LOG_LEVEL value '%s': not a logging level "
                            "(DEBUG, INFO, WARNING, ERROR, CRITICAL); level unchanged", value)
        return
    nixl_logger.setLevel(level)
    nixl_logger.info("Log level set to %s from NIXL_LOG_LEVEL", value.upper())


def setup_logging():
    """Configures the "nixl" logger once per process."""
    global _configured
    if _configured:
        return
    set_log_level_by_env(_logging.getLogger("nixl"))
    _configured = True


def get_logger(name):
    """The logger "nixl.<name without leading underscores>"."""
    setup_logging()
    return _logging.getLogger("nixl." + name.lstrip("_"))


__all__ = ["get_logger", "setup_logging", "set_log_level_by_env"]
