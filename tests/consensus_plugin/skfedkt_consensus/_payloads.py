"""What the consensus distillation's uploads and messages hold, and their typed readers."""

from __future__ import annotations

from typing import TypedDict, cast

import numpy as np

from skfedkt.algorithm import Message


class ConsensusUpload(TypedDict, total=False):
    """A party's upload: its class probabilities on the public set, in every round;
    nothing in the final step."""

    #: shape (n_public, n_classes)
    proba: np.ndarray


class ConsensusMessage(TypedDict):
    """The server's message: the consensus the next round learns."""

    #: the sharpened mean probabilities, shape (n_public, n_classes)
    consensus: np.ndarray


def upload_payload(upload: Message) -> ConsensusUpload:
    """A party's upload, read as what it holds."""
    return cast(ConsensusUpload, upload.payload)


def message_payload(message: Message) -> ConsensusMessage:
    """The server's message, read as what it holds."""
    return cast(ConsensusMessage, message.payload)
