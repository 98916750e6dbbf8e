"""Durations as Python code writes them: seconds (``int`` or ``float``) or a
``datetime.timedelta``. The core counts whole milliseconds; this module only converts, and
refuses what cannot be a duration, naming the field. Ranges (a lease of at least 300 ms,
and so on) stay the core's to check.

The ``*_ms`` names of the first releases still work: each use warns once per call site with
a ``DeprecationWarning`` (shown by default in ``__main__`` and by pytest), and giving both
names of one field is refused. They will go in a later minor release.
"""

from __future__ import annotations

import math
import numbers
import warnings
from datetime import timedelta
from typing import Any, Optional, Type, Union

#: A duration argument: seconds as a number, or a ``timedelta``.
Duration = Union[float, int, timedelta]


def to_ms(field: str, value: Any, error: Type[Exception]) -> int:
    """``value`` (seconds or a timedelta) in whole milliseconds, rounded to the nearest.
    ``error`` is the class to raise (ConfigError for options, InvalidInput for calls)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise error(f"invalid {_what(error)} `{field}`: expected seconds (int or float) or a datetime.timedelta, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise error(f"invalid {_what(error)} `{field}`: must be a finite duration >= 0 seconds, got {value!r}")
    return int(round(seconds * 1000))


def _what(error: Type[Exception]) -> str:
    # The core's wording for each kind, so a message reads the same whoever raised it.
    return "configuration at" if error.__name__ == "ConfigError" else "input:"


def pick_ms(field: str, value: Any, old_field: str, old_value: Any, error: Type[Exception], stacklevel: int = 3) -> Optional[int]:
    """The milliseconds for one field given under its new name (seconds / timedelta) or its
    deprecated ``*_ms`` name (milliseconds, passed on for the core to check)."""
    if old_value is not None:
        if value is not None:
            raise error(f"invalid {_what(error)} `{field}`: give `{field}` (seconds or timedelta) or the deprecated `{old_field}`, not both")
        warnings.warn(f"`{old_field}` is deprecated: pass `{field}` in seconds or as a datetime.timedelta", DeprecationWarning, stacklevel=stacklevel)
        return old_value  # type: ignore[no-any-return]
    return None if value is None else to_ms(field, value, error)


def from_ms(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)
