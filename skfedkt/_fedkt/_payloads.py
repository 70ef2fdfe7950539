"""What a FedKT party uploads, field by field: its payload, typed so that every key is
checked.

A payload is built as ``dict(FedKTUpload(...))``: the TypedDict checks its keys, and
`PartyUpload` holds a plain dict (skops writes it as one). It is read through
`fedkt_upload`.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import numpy as np

from .._engine._context import Message


class FedKTUpload(TypedDict):
    """A FedKT party's upload: its students, all it sends beside its manifest."""

    #: the party's fitted students, one per partition of its rows
    students: list[Any]
    #: per student, the class codes of its outputs among the agreed classes
    codes: list[np.ndarray]


def fedkt_upload(upload: Message) -> FedKTUpload:
    """`upload`'s payload, read as a FedKT party's."""
    return cast(FedKTUpload, upload.payload)
