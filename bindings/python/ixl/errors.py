"""Exceptions: one class per ixl status, each under the NIXL exception it corresponds to.

`except ixl.NotRegisteredError` and `except nixlNotFoundError` both catch an
IXL_ERR_NOT_REGISTERED; every class derives from `ixl.Error`, which carries the status
(`.status`, `.status_name`) and the agent's message (`.detail`).
"""


class Error(RuntimeError):
    """An ixl call failed. status: the negative ixl status; status_name: its name. A
    RuntimeError, as NIXL's exceptions (nixl._bindings) are."""

    status = None
    status_name = "IXL_ERR"

    def __init__(self, message, status=None, detail=""):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.detail = detail


# NIXL's exception names (nixl._bindings), the categories of ixl's statuses.
class nixlInvalidParamError(Error):
    pass


class nixlMismatchError(Error):
    pass


class nixlNotPostedError(Error):
    pass


class nixlRepostActiveError(Error):
    pass


class nixlCancelledError(Error):
    pass


class nixlNotFoundError(Error):
    pass


class nixlNotAllowedError(Error):
    pass


class nixlBackendError(Error):
    pass


class nixlNotSupportedError(Error):
    pass


class nixlRemoteDisconnectError(Error):
    pass


class nixlNoTelemetryError(Error):
    pass


class nixlUnknownError(Error):
    pass


NIXL_ERRORS = (nixlInvalidParamError, nixlMismatchError, nixlNotPostedError,
               nixlRepostActiveError, nixlCancelledError, nixlNotFoundError,
               nixlNotAllowedError, nixlBackendError, nixlNotSupportedError,
               nixlRemoteDisconnectError, nixlNoTelemetryError, nixlUnknownError)

# status: (ixl class name, status name, NIXL category). Values never change (ixl_types.h).
_TABLE = {
    -100: ("InvalidArgError", "IXL_ERR_INVALID_ARG", nixlInvalidParamError),
    -101: ("MismatchError", "IXL_ERR_MISMATCH", nixlMismatchError),
    -102: ("MalformedError", "IXL_ERR_MALFORMED", nixlInvalidParamError),
    -103: ("TooLargeError", "IXL_ERR_TOO_LARGE", nixlInvalidParamError),
    -104: ("BadMemTypeError", "IXL_ERR_BAD_MEM_TYPE", nixlInvalidParamError),
    -105: ("BadIndexError", "IXL_ERR_INDEX", nixlInvalidParamError),
    -200: ("NotPostedError", "IXL_ERR_NOT_POSTED", nixlNotPostedError),
    -201: ("RepostActiveError", "IXL_ERR_REPOST_ACTIVE", nixlRepostActiveError),
    -202: ("CanceledError", "IXL_ERR_CANCELED", nixlCancelledError),
    -203: ("StaleError", "IXL_ERR_STALE", nixlRemoteDisconnectError),
    -204: ("WaitTimeoutError", "IXL_ERR_TIMEOUT", nixlUnknownError),
    -205: ("NotRegisteredError", "IXL_ERR_NOT_REGISTERED", nixlNotFoundError),
    -206: ("NoTelemetryError", "IXL_ERR_NO_TELEMETRY", nixlNoTelemetryError),
    -207: ("NotifTooLargeError", "IXL_ERR_NOTIF_TOO_LARGE", nixlInvalidParamError),
    -300: ("RemoteDisconnectError", "IXL_ERR_REMOTE_DISCONNECT", nixlRemoteDisconnectError),
    -301: ("ConnRefusedError", "IXL_ERR_CONN_REFUSED", nixlRemoteDisconnectError),
    -302: ("UnreachableError", "IXL_ERR_UNREACHABLE", nixlRemoteDisconnectError),
    -303: ("ProtocolError", "IXL_ERR_PROTOCOL", nixlBackendError),
    -304: ("RemoteRefusedError", "IXL_ERR_REMOTE_REFUSED", nixlBackendError),
    -305: ("AuthError", "IXL_ERR_AUTH", nixlBackendError),
    -400: ("BackendError", "IXL_ERR_BACKEND", nixlBackendError),
    -401: ("NotSupportedError", "IXL_ERR_NOT_SUPPORTED", nixlNotSupportedError),
    -402: ("IoError", "IXL_ERR_IO", nixlBackendError),
    -403: ("NoSpaceError", "IXL_ERR_NO_SPACE", nixlBackendError),
    -404: ("NoBackendError", "IXL_ERR_NO_BACKEND", nixlNotFoundError),
    -405: ("PluginError", "IXL_ERR_PLUGIN", nixlBackendError),
    -406: ("NotifUnsupportedError", "IXL_ERR_NOTIF_UNSUPPORTED", nixlNotSupportedError),
    -500: ("NotFoundError", "IXL_ERR_NOT_FOUND", nixlNotFoundError),
    -501: ("ExistsError", "IXL_ERR_EXISTS", nixlNotAllowedError),
    -502: ("BusyError", "IXL_ERR_BUSY", nixlNotAllowedError),
    -503: ("NoMemoryError", "IXL_ERR_NO_MEMORY", nixlUnknownError),
    -504: ("NotAllowedError", "IXL_ERR_NOT_ALLOWED", nixlNotAllowedError),
    -505: ("SysCallError", "IXL_ERR_SYSTEM", nixlUnknownError),
}

# status -> class; the classes are also attributes of this module (ixl.errors.BusyError).
BY_STATUS = {}
for _status, (_name, _sname, _base) in _TABLE.items():
    _cls = type(_name, (_base,), {"status": _status, "status_name": _sname,
                                  "__doc__": f"{_sname} ({_status})",
                                  "__module__": __name__})
    BY_STATUS[_status] = _cls
    globals()[_name] = _cls
del _status, _name, _sname, _base, _cls

__all__ = ["Error", "BY_STATUS"] + [c.__name__ for c in NIXL_ERRORS] + \
    [c.__name__ for c in BY_STATUS.values()]


def from_status(status, name, detail, what=""):
    """The exception for a failed call: 'what: IXL_ERR_X: detail'."""
    cls = BY_STATUS.get(status, nixlUnknownError)
    msg = name if not detail else f"{name}: {detail}"
    if what:
        msg = f"{what}: {msg}"
    return cls(msg, status=status, detail=detail)
