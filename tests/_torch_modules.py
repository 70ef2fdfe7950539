"""PyTorch modules for the skorch tests; importable so loky workers can unpickle them."""

import os
import uuid
from pathlib import Path

import numpy as np
from skorch.callbacks import Callback
import torch
from torch import nn


class MLP(nn.Module):
    """A small multilayer perceptron returning logits, one output per class."""

    def __init__(self, n_features=64, n_hidden=32, n_classes=10, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(n_features, n_hidden, dtype=dtype), nn.ReLU(),
            nn.Linear(n_hidden, n_classes, dtype=dtype),
        )

    def forward(self, X):
        return self.layers(X)


class SmallCNN(nn.Module):
    """A LeNet-like network for 8x8 one-channel images: a 3x3 convolution, 2x2 max
    pooling, one dense layer; `dtype` float64 makes exact comparisons possible."""

    def __init__(self, n_classes=10, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 4, 3, dtype=dtype), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(4 * 3 * 3, n_classes, dtype=dtype),
        )

    def forward(self, X):
        return self.layers(X)


class Conv1dNet(nn.Module):
    """A 1-D convolution over the 64 pixels as one channel, then a dense layer."""

    def __init__(self, n_classes=10, dtype=None):
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 5, dtype=dtype)
        self.out = nn.Linear(2 * 60, n_classes, dtype=dtype)

    def forward(self, X):
        return self.out(torch.relu(self.conv(X.unsqueeze(1))).flatten(1))


class LSTMClassifier(nn.Module):
    """An LSTM over the 64 pixels as a sequence of 8 steps of 8 values."""

    def __init__(self, n_classes=10, dtype=None):
        super().__init__()
        self.lstm = nn.LSTM(8, 8, batch_first=True, dtype=dtype)
        self.out = nn.Linear(8, n_classes, dtype=dtype)

    def forward(self, X):
        return self.out(self.lstm(X.view(-1, 8, 8))[0][:, -1])


def to_images(X):
    """Rows of 64 pixels as float64 8x8 images of one channel."""
    return np.asarray(X, dtype=np.float64).reshape(-1, 1, 8, 8)


def to_float32(X):
    """skorch needs float32 input; a module-level function pickles, a lambda does not."""
    return np.asarray(X, dtype=np.float32)


class DeviceRecorder(Callback):
    """A skorch callback that writes, when a net starts training, the device it was
    given and the device its module's weights are on, one file per fit in `folder`:
    which clones, in any worker process, trained where."""

    def __init__(self, folder):
        self.folder = folder

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        weights = next(net.module_.parameters()).device
        path = Path(self.folder) / f"{os.getpid()}-{uuid.uuid4().hex}.txt"
        path.write_text(f"{net.device} {weights.type} {len(X)}")


class ThreadRecorder(Callback):
    """A skorch callback that notes, when a net starts training, how many threads torch
    and every BLAS/OpenMP pool may use, one file per fit in `folder`."""

    def __init__(self, folder):
        self.folder = folder

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        import torch
        from threadpoolctl import threadpool_info

        pools = max(pool["num_threads"] for pool in threadpool_info())
        path = Path(self.folder) / f"{os.getpid()}-{uuid.uuid4().hex}.txt"
        path.write_text(f"{torch.get_num_threads()} {pools}")
