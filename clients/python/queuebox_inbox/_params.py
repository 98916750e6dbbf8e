"""Statement parameters as the JSON text the core reads (``tx.execute``, ``tx.query``,
``Database.execute``, ``Database.query``).

The core binds each JSON value by its kind: ``None`` untyped (the statement gives it its
type), ``bool`` boolean, ``str`` text, ``dict``/``list`` jsonb, an integer that fits 64 bits
bigint, and every other number as exact ``numeric`` from its literal text. ``json.dumps``
already writes an ``int`` of any size digit for digit; it refuses ``decimal.Decimal``, which
goes here as its exact literal (``Decimal("0.10")`` is ``0.10``, never a float). A NaN or an
infinity (Decimal or float) has no JSON literal and no ``numeric`` value: refused, naming the
parameter.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, List, Sequence

from .errors import InvalidInput


def encode(params: Sequence[Any]) -> str:
    """``params`` as one JSON array text; Decimal values as their exact number literals."""
    values = list(params)
    try:
        # Most statements hold no Decimal and no NaN: the C encoder, as before.
        return json.dumps(values, allow_nan=False)
    except (TypeError, ValueError):
        pass
    seen: List[int] = []
    return "[" + ",".join(_value(v, f"${i + 1}", seen) for i, v in enumerate(values)) + "]"


def _value(v: Any, where: str, seen: List[int]) -> str:
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise InvalidInput(f"invalid input: parameter {where}: Decimal {v} is not a finite number; only finite numbers can be sent")
        # str() of a finite Decimal is a JSON number literal (``12.50``, ``1E+3``, ``-0``).
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        raise InvalidInput(f"invalid input: parameter {where}: {v} is not a finite number; only finite numbers can be sent")
    if isinstance(v, (dict, list, tuple)):
        if id(v) in seen:
            raise ValueError(f"parameter {where}: circular reference detected")
        seen.append(id(v))
        try:
            if isinstance(v, dict):
                return "{" + ",".join(f"{_key(k)}:{_value(x, f'{where}[{k!r}]', seen)}" for k, x in v.items()) + "}"
            return "[" + ",".join(_value(x, f"{where}[{i}]", seen) for i, x in enumerate(v)) + "]"
        finally:
            seen.pop()
    # Everything else as json.dumps writes it (and refuses what it refuses).
    return json.dumps(v)


def _key(k: Any) -> str:
    """An object key as json.dumps makes it: a string, or a str/int/float/bool/None's JSON text."""
    if isinstance(k, str):
        return json.dumps(k)
    if k is None or isinstance(k, (int, float)):
        return json.dumps(json.dumps(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
