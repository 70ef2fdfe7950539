"""The FedKT paper's networks as PyTorch modules in skorch, for the benchmarks that run
networks on a device: its MLP (MNIST) and its LeNet-style CNN (SVHN, CIFAR-10);
importable by name, so that worker processes can unpickle them."""

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


class PaperCNN(nn.Module):
    """Two 5x5 convolutions of 6 and 16 channels, each followed by 2x2 max pooling,
    then dense layers of 120 and 84 ReLU units and one output (logit) per class."""

    def __init__(self, channels=3, size=32, n_classes=10):
        super().__init__()
        side = ((size - 4) // 2 - 4) // 2
        self.layers = nn.Sequential(
            nn.Conv2d(channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(16 * side * side, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, n_classes),
        )

    def forward(self, X):
        return self.layers(X)


class ToImages:
    """Rows of ``channels * size * size`` pixels as float32 images (n, channels, size,
    size): scikit-learn passes 2-D rows, the convolutions take 4-D arrays."""

    def __init__(self, channels, size):
        self.channels, self.size = channels, size

    def __call__(self, X):
        return np.asarray(X, dtype=np.float32).reshape(-1, self.channels, self.size,
                                                       self.size)


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


def paper_cnn(device, epochs, channels=3, size=32, n_classes=10):
    """The paper's CNN and its settings (Adam, learning rate 0.001, batch 32) on
    `device`, trained `epochs` epochs, on rows of ``channels * size * size`` pixels."""
    net = NeuralNetClassifier(
        PaperCNN, module__channels=channels, module__size=size, module__n_classes=n_classes,
        criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=0.001,
        batch_size=32, max_epochs=epochs, train_split=None, verbose=0, device=device,
    )
    return make_pipeline(FunctionTransformer(ToImages(channels, size)), net)
