"""PyTorch modules for the skorch tests; importable so loky workers can unpickle them."""

import numpy as np
from torch import nn


class MLP(nn.Module):
    """A small multilayer perceptron returning logits, one output per class."""

    def __init__(self, n_features=64, n_hidden=32, n_classes=10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(n_features, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_classes)
        )

    def forward(self, X):
        return self.layers(X)


def to_float32(X):
    """skorch needs float32 input; a module-level function pickles, a lambda does not."""
    return np.asarray(X, dtype=np.float32)
