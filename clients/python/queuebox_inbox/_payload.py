"""Typed payloads: ``Worker(..., payload_type=T)`` hands the handler ``message.payload`` as
a ``T`` instead of the decoded JSON.

``T`` may be a dataclass (built with ``T(**payload)``: the payload must be a JSON object
with exactly the dataclass's fields; nested values stay as JSON gives them, and field types
are not checked, as dataclasses never check them), a pydantic v2 model
(``T.model_validate(payload)``: types checked and nested models built, when pydantic is
installed; the package does not depend on it), or any callable taking the JSON value.

A payload that does not decode never reaches the handler. ``invalid_payload="dead"`` (the
default) dead-letters the row at once, with ``last_error`` naming the type and the error:
the stored payload cannot change, so retrying it could only fail again.
``invalid_payload="retry"`` hands the failure to the retry policy instead, for a rollout in
which workers of the old and the new payload shape run side by side.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from .errors import ConfigError

INVALID_PAYLOAD = ("dead", "retry")


def decoder(payload_type: Any) -> Optional[Callable[[Any], Any]]:
    if payload_type is None:
        return None
    if isinstance(payload_type, type) and dataclasses.is_dataclass(payload_type):

        def from_object(value: Any) -> Any:
            if not isinstance(value, dict):
                raise TypeError(f"expected a JSON object, got {type(value).__name__}")
            return payload_type(**value)

        return from_object
    validate = getattr(payload_type, "model_validate", None)
    if callable(validate):
        return validate  # type: ignore[no-any-return]
    if callable(payload_type):
        return payload_type  # type: ignore[no-any-return]
    raise ConfigError(f"invalid configuration at `payload_type`: expected a dataclass, a pydantic model or a callable, got {payload_type!r}")


def type_name(payload_type: Any) -> str:
    return getattr(payload_type, "__qualname__", None) or repr(payload_type)
