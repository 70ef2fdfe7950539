"""What the consensus distillation's messages hold, and their typed reader; a party sends
its probabilities in the sum (`_classifier.FIELDS`)."""

from __future__ import annotations

from typing import TypedDict, cast

import numpy as np

from skfedkt.algorithm import Message


class ConsensusMessage(TypedDict):
    """The server's message: the consensus the next round learns."""

    #: the sharpened mean probabilities, shape (n_public, n_classes)
    consensus: np.ndarray


def message_payload(message: Message) -> ConsensusMessage:
    """The server's message, read as what it holds."""
    return cast(ConsensusMessage, message.payload)
