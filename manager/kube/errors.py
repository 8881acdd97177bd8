"""The one place where an HTTP status (or a transport failure) becomes an exception class.

Callers test by class, never by message: ``except errors.NotFound``. ``RETRYABLE`` lists the
classes a bounded retry may try again.
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after


class BadRequest(KubeError): ...


class Unauthorized(KubeError): ...


class Forbidden(KubeError): ...


class NotFound(KubeError): ...


class Conflict(KubeError):
    """A resourceVersion precondition failed (optimistic concurrency): re-read and retry."""


class AlreadyExists(KubeError): ...


class Gone(KubeError):
    """The resourceVersion is too old (410): a watch must re-list."""


class Invalid(KubeError):
    """The object failed validation (422); ``message`` names the field."""


class TooManyRequests(KubeError): ...


class ServerError(KubeError): ...


class Unreachable(KubeError):
    """No HTTP answer at all: connection refused or reset, TLS failure, timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unreachable", message)


RETRYABLE: tuple[type[KubeError], ...] = (ServerError, TooManyRequests, Unreachable)

_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def from_status(
    status: int, body: bytes | str | dict[str, Any] | None, *, retry_after: str | None = None
) -> KubeError:
    """Build the exception for an HTTP error status and its (metav1.Status) body."""
    parsed: dict[str, Any] = {}
    if isinstance(body, dict):
        parsed = body
    elif body:
        try:
            loaded = json.loads(body)
            parsed = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            parsed = {"message": body.decode(errors="replace") if isinstance(body, bytes) else body}
    reason = str(parsed.get("reason") or "")
    message = str(parsed.get("message") or reason or f"HTTP {status}")
    if status == 409:
        cls: type[KubeError] = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, KubeError)
    delay = None
    if retry_after:
        try:
            delay = float(retry_after)
        except ValueError:
            delay = None
    return cls(
        status, reason or cls.__name__, message, details=parsed.get("details"), retry_after=delay
    )
