"""Twelve skorch nets as people write them, for the stacked path's tests and
``bench_networks.py --corpus``: skorch's README and MNIST tutorial as written, the
FedKT paper's MLP with skorch's defaults and with the settings users add (shuffling,
early stopping, a learning-rate schedule), batch and layer normalisation, a scaler
before the net, and skorch's binary classifier.

Each entry builds its estimator for rows of `n_features` features and `n_classes`
classes (skorch's README and tutorial fix theirs: 20 features and 2 classes, 784 and
10); ``dtype=torch.float64`` builds it in float64, where a stacked fit can be compared
with a separate one to 1e-10. The modules are importable by name, so that worker
processes can unpickle them; ``python benchmarks/bench_networks.py --corpus`` prints
which path each takes and how long each trains.
"""

from typing import Callable, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from skorch import NeuralNetBinaryClassifier, NeuralNetClassifier
from skorch.callbacks import EarlyStopping, LRScheduler
from torch import nn


class ReadmeModule(nn.Module):
    """skorch's README module: two dense layers with dropout, softmax output."""

    def __init__(self, num_units=10, nonlin=nn.ReLU(), n_features=20, n_classes=2,
                 dtype=None):
        super().__init__()
        self.dense0 = nn.Linear(n_features, num_units, dtype=dtype)
        self.nonlin = nonlin
        self.dropout = nn.Dropout(0.5)
        self.dense1 = nn.Linear(num_units, num_units, dtype=dtype)
        self.output = nn.Linear(num_units, n_classes, dtype=dtype)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, X, **kwargs):
        X = self.nonlin(self.dense0(X))
        X = self.dropout(X)
        X = self.nonlin(self.dense1(X))
        X = self.softmax(self.output(X))
        return X


class ClassifierModule(nn.Module):
    """skorch's MNIST tutorial MLP: one hidden layer, dropout, softmax output."""

    def __init__(self, input_dim=784, hidden_dim=98, output_dim=10, dropout=0.5,
                 dtype=None):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(input_dim, hidden_dim, dtype=dtype)
        self.output = nn.Linear(hidden_dim, output_dim, dtype=dtype)

    def forward(self, X, **kwargs):
        X = F.relu(self.hidden(X))
        X = self.dropout(X)
        X = F.softmax(self.output(X), dim=-1)
        return X


class Cnn(nn.Module):
    """skorch's MNIST tutorial CNN on 1 x 28 x 28 images: two convolutions, channel
    dropout, a dense layer with dropout, softmax output."""

    def __init__(self, dropout=0.5, n_classes=10, dtype=None):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=3, dtype=dtype)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, dtype=dtype)
        self.conv2_drop = nn.Dropout2d(p=dropout)
        self.fc1 = nn.Linear(1600, 100, dtype=dtype)
        self.fc2 = nn.Linear(100, n_classes, dtype=dtype)
        self.fc1_drop = nn.Dropout(p=dropout)

    def forward(self, x):
        x = torch.relu(F.max_pool2d(self.conv1(x), 2))
        x = torch.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, x.size(1) * x.size(2) * x.size(3))
        x = torch.relu(self.fc1_drop(self.fc1(x)))
        x = torch.softmax(self.fc2(x), dim=-1)
        return x


class PaperMLP(nn.Module):
    """The FedKT paper's MLP: two hidden layers of 100 ReLU units, one logit a class."""

    def __init__(self, n_features=784, n_classes=10, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 100, dtype=dtype), nn.ReLU(),
                                    nn.Linear(100, 100, dtype=dtype), nn.ReLU(),
                                    nn.Linear(100, n_classes, dtype=dtype))

    def forward(self, X):
        return self.layers(X)


class BatchNormMLP(nn.Module):
    """A hidden layer normalised by batch statistics."""

    def __init__(self, n_features=784, n_classes=10, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 100, dtype=dtype),
                                    nn.BatchNorm1d(100, dtype=dtype), nn.ReLU(),
                                    nn.Linear(100, n_classes, dtype=dtype))

    def forward(self, X):
        return self.layers(X)


class LayerNormMLP(nn.Module):
    """A hidden layer with layer normalisation and GELU."""

    def __init__(self, n_features=784, n_classes=10, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 100, dtype=dtype),
                                    nn.LayerNorm(100, dtype=dtype), nn.GELU(),
                                    nn.Linear(100, n_classes, dtype=dtype))

    def forward(self, X):
        return self.layers(X)


class BinaryMLP(nn.Module):
    """A hidden layer with dropout and one logit, for skorch's binary classifier."""

    def __init__(self, n_features=784, dtype=None):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, 100, dtype=dtype), nn.ReLU(),
                                    nn.Dropout(0.2), nn.Linear(100, 1, dtype=dtype))

    def forward(self, X):
        return self.layers(X)


def to_float32(X):
    """skorch computes in float32; a module-level function pickles, a lambda does not."""
    return np.asarray(X, dtype=np.float32)


def to_float64(X):
    return np.asarray(X, dtype=np.float64)


def to_images(X, dtype=np.float32):
    """Rows of 784 pixels, or of 64 (8 x 8 digits, each pixel repeated 3 x 3 and the
    image padded to 28 x 28), as one-channel 28 x 28 images."""
    X = np.asarray(X, dtype=dtype)
    if X.shape[1] == 64:
        X = np.kron(X.reshape(-1, 8, 8), np.ones((3, 3), dtype=dtype))
        X = np.pad(X, ((0, 0), (2, 2), (2, 2)))
    return X.reshape(-1, 1, 28, 28)


def to_images64(X):
    return to_images(X, np.float64)


def _cast(dtype):
    return FunctionTransformer(to_float64 if dtype == torch.float64 else to_float32)


class Net(NamedTuple):
    """One net of the corpus."""

    name: str
    build: Callable
    """``build(n_features, n_classes, dtype)``: the estimator."""
    kind: str
    """"mlp", "cnn" or "binary" (two classes only)."""


def _readme(n_features, n_classes, dtype):
    net = NeuralNetClassifier(ReadmeModule, module__n_features=n_features,
                              module__n_classes=n_classes, module__dtype=dtype,
                              max_epochs=10, criterion=nn.CrossEntropyLoss(), lr=0.1,
                              iterator_train__shuffle=True)
    return make_pipeline(_cast(dtype), net)


def _tutorial_mlp(n_features, n_classes, dtype):
    net = NeuralNetClassifier(ClassifierModule, module__input_dim=n_features,
                              module__output_dim=n_classes, module__dtype=dtype,
                              max_epochs=20, lr=0.1)
    return make_pipeline(_cast(dtype), net)


def _tutorial_cnn(n_features, n_classes, dtype):
    net = NeuralNetClassifier(Cnn, module__n_classes=n_classes, module__dtype=dtype,
                              max_epochs=10, lr=0.002, optimizer=torch.optim.Adam)
    return make_pipeline(FunctionTransformer(
        to_images64 if dtype == torch.float64 else to_images), net)


def _paper(module=PaperMLP, **settings):
    def build(n_features, n_classes, dtype):
        options = dict(criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam,
                       lr=0.001, batch_size=32, max_epochs=20)
        options.update(settings)
        net = NeuralNetClassifier(module, module__n_features=n_features,
                                  module__n_classes=n_classes, module__dtype=dtype,
                                  **options)
        return make_pipeline(_cast(dtype), net)
    return build


def _scaled(n_features, n_classes, dtype):
    pipeline = _paper(train_split=None)(n_features, n_classes, dtype)
    return make_pipeline(StandardScaler(), *[step for _, step in pipeline.steps])


def _binary(n_features, n_classes, dtype):
    net = NeuralNetBinaryClassifier(BinaryMLP, module__n_features=n_features,
                                    module__dtype=dtype, lr=0.05, max_epochs=20,
                                    iterator_train__shuffle=True)
    return make_pipeline(_cast(dtype), net)


CORPUS = [
    Net("skorch README (dropout, softmax, shuffled)", _readme, "mlp"),
    Net("skorch tutorial MLP (dropout, defaults)", _tutorial_mlp, "mlp"),
    Net("skorch tutorial CNN (Dropout2d, Adam)", _tutorial_cnn, "cnn"),
    Net("paper MLP, train_split=None", _paper(train_split=None), "mlp"),
    Net("paper MLP, skorch's defaults", _paper(), "mlp"),
    Net("paper MLP, shuffled", _paper(train_split=None, iterator_train__shuffle=True),
        "mlp"),
    Net("paper MLP, EarlyStopping(patience=3)",
        _paper(callbacks=[EarlyStopping(patience=3)]), "mlp"),
    Net("paper MLP, SGD and StepLR",
        _paper(train_split=None, optimizer=torch.optim.SGD, lr=0.05,
               optimizer__momentum=0.9,
               callbacks=[LRScheduler(policy="StepLR", step_size=5, gamma=0.5)]), "mlp"),
    Net("MLP with BatchNorm1d, drop_last", _paper(BatchNormMLP, train_split=None,
                                                  iterator_train__drop_last=True), "mlp"),
    Net("MLP with LayerNorm and GELU, AdamW",
        _paper(LayerNormMLP, train_split=None, optimizer=torch.optim.AdamW), "mlp"),
    Net("StandardScaler, then the paper MLP", _scaled, "mlp"),
    Net("NeuralNetBinaryClassifier", _binary, "binary"),
]
