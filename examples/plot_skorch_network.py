"""
A PyTorch network as the base estimator (skorch)
================================================

FedKT needs nothing from a model but ``fit`` and ``predict``, so a neural network wrapped
by `skorch <https://skorch.readthedocs.io>`_ works like any scikit-learn classifier. The
paper's MNIST model is a multilayer perceptron with two hidden layers of 100 units; we
use the same on ``digits``.
"""

# %%
# The network
# -----------
# Three things matter with skorch:
#
# * the module has **one output per class**: skfedkt trains skorch nets on the class
#   codes ``0..K-1``, so outputs line up with ``classes_`` even for a party that never
#   saw some digits;
# * skorch wants ``float32`` input: a ``FunctionTransformer`` with a function of our
#   own casts it (a fitted model holding a lambda would not pickle);
# * the module class may live in the script or notebook itself, with any ``n_jobs``:
#   this example fits on two cores, and the fitted networks hold this very class.
#
# On a machine with a GPU, pass ``device="cuda"`` to the ``NeuralNetClassifier``.
#
# FedKT trains each tier's networks (every party's teachers, then the students)
# together as one stacked module, each as its own ``fit`` would train it: see the
# user guide's page on scikit-learn and skorch.
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from skorch import NeuralNetClassifier
from torch import nn

from skfedkt import FedKTClassifier
from skfedkt.baselines import solo_scores
from skfedkt.datasets import load_federated


class MLP(nn.Module):
    def __init__(self, n_features=64, n_hidden=100, n_classes=10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(n_features, n_hidden), nn.ReLU(),
            nn.Linear(n_hidden, n_hidden), nn.ReLU(),
            nn.Linear(n_hidden, n_classes),
        )

    def forward(self, X):
        return self.layers(X)


def to_float32(X):
    return np.asarray(X, dtype=np.float32)


net = make_pipeline(
    StandardScaler(),
    FunctionTransformer(to_float32),
    NeuralNetClassifier(MLP, criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam,
                        lr=0.01, max_epochs=30, batch_size=64, train_split=None,
                        verbose=0),
)

# %%
# Federated training
# ------------------
# skorch has no ``random_state``; skfedkt seeds torch's random number generator in each
# clone's task from ``random_state``, so the run is reproducible.
data = load_federated("digits", n_parties=10, beta=0.5, random_state=0)
fedkt = FedKTClassifier(net, n_students=1, n_jobs=2, random_state=0)
fedkt.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
solo = solo_scores(net, data.X_train, data.y_train, data.groups, data.X_test, data.y_test,
                   random_state=0)
print(f"FedKT with an MLP: {fedkt.score(data.X_test, data.y_test):.3f}")
print(f"each party alone:  {solo.mean():.3f} (mean of {np.round(solo, 3)})")

# %%
# Each tier's networks were trained together, the final model too (alone, it still
# skips skorch's per-step machinery): ``tier_fits_`` says so, tier by tier.
for tier in fedkt.tier_fits_:
    print(f"{tier['tier']}: {tier['clones']} net(s), {tier['path']}, "
          f"{tier['seconds']:.1f} s" + (f" ({tier['reason']})" if tier["reason"] else ""))

# %%
# The students and the final model are skorch nets too; ``predict_proba`` has one column
# per digit. The bars compare the federated model with each party's own network: with
# ten parties of about 130 rows each, the federated network (0.791) beats every one of
# them (0.578 to 0.742). skorch nets take no ``sample_weight``, which FedKT needs to
# teach soft labels, so its students learn the teachers' winning digits here (the
# default falls back to them); soft votes just use ``predict_proba``.
proba = fedkt.predict_proba(data.X_test)
print("probability columns:", proba.shape[1], "- classes:", fedkt.classes_)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar([str(p) for p in range(10)], solo, color="grey", label="party alone")
ax.axhline(fedkt.score(data.X_test, data.y_test), color="tab:blue", label="FedKT")
ax.set(xlabel="party", ylabel="test accuracy", ylim=(0, 1), title="digits, 10 parties, MLP")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %%
# A convolutional network on images
# ---------------------------------
# The FedKT paper's network for SVHN and CIFAR-10 is LeNet-like: two 5x5 convolutions
# of 6 and 16 channels, each followed by 2x2 max pooling, then dense layers of 120 and
# 84 units. scikit-learn passes rows of pixels; a ``FunctionTransformer`` in front of
# the net makes them the 4-D arrays (images, channels, height, width) a convolution
# takes. The digits are 8x8 pixels: each pixel repeated into a 2x2 block makes the
# 16x16 images that the two convolutions need at least. On a GPU its tiers train as
# stacks too; on the CPU a stack of convolutions runs no faster than the convolutions
# one after another, so they train one by one there, and ``tier_fits_`` says so.


class LeNet(nn.Module):
    def __init__(self, channels=1, size=16, n_classes=10):
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


def to_images(X):
    images = np.asarray(X, dtype=np.float32).reshape(-1, 1, 8, 8)
    return images.repeat(2, axis=2).repeat(2, axis=3)


cnn = make_pipeline(
    StandardScaler(),
    FunctionTransformer(to_images),
    NeuralNetClassifier(LeNet, criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam,
                        lr=0.01, max_epochs=10, batch_size=32, train_split=None,
                        verbose=0),
)
fedkt_cnn = FedKTClassifier(cnn, n_students=1, n_teachers=2, random_state=0)
fedkt_cnn.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
print(f"FedKT with the paper's CNN: {fedkt_cnn.score(data.X_test, data.y_test):.3f}")
for tier in fedkt_cnn.tier_fits_:
    print(f"{tier['tier']}: {tier['path']}" + (f" ({tier['reason']})" if tier["reason"] else ""))
