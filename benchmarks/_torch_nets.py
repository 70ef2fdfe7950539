"""The FedKT paper's MLP as a PyTorch module in skorch, for the benchmarks that run
networks on a device; importable by name, so that worker processes can unpickle it."""

import numpy as np
import torch
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from skorch import NeuralNetClassifier
from torch import nn


class PaperMLP(nn.Module):
    """Two hidden layers of 100 ReLU units, one output (logit) per class."""

    def __init__(self, n_features=64, n_classes=10):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 100), nn.ReLU(),
                                    nn.Linear(100, 100), nn.ReLU(),
                                    nn.Linear(100, n_classes))

    def forward(self, X):
        return self.layers(X)


def to_float32(X):
    """skorch computes in float32; a module-level function pickles, a lambda does not."""
    return np.asarray(X, dtype=np.float32)


def paper_net(device, epochs, n_features=64, n_classes=10):
    """The paper's MLP and its settings (Adam, learning rate 0.001, batch 32) on
    `device`, trained `epochs` epochs."""
    net = NeuralNetClassifier(
        PaperMLP, module__n_features=n_features, module__n_classes=n_classes,
        criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=0.001,
        batch_size=32, max_epochs=epochs, train_split=None, verbose=0, device=device,
    )
    return make_pipeline(FunctionTransformer(to_float32), net)
