"""What a one-shot party uploads, field by field: its payload, typed so that every key
is checked.

A payload is built as ``dict(OneShotUpload(...))``: the TypedDict checks its keys, and
`PartyUpload` holds a plain dict (skops writes it as one). It is read through
`oneshot_upload`.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import numpy as np

from .._engine._context import Message


class OneShotUpload(TypedDict):
    """A one-shot party's upload: its local model, or nothing from a party with too few
    rows to train one."""

    #: the party's fitted local model; None where it trained none
    model: Any
    #: the class codes of that model's outputs among the agreed classes (None without)
    codes: np.ndarray | None


def oneshot_upload(upload: Message) -> OneShotUpload:
    """`upload`'s payload, read as a one-shot party's."""
    return cast(OneShotUpload, upload.payload)
