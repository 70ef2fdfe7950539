"""
Quickstart: ten hospitals, one model, no shared rows
====================================================

Ten parties each hold some handwritten digits, with a skewed mix of labels (a
Dirichlet(0.5) draw, as in the FedKT paper). They may not pool their rows, but everyone
may see a public set of *unlabelled* digits. FedKT trains one model for all of them in a
single round of communication.
"""

# %%
# The federated data
# ------------------
# :func:`~skfedkt.datasets.load_federated` splits the rows 75% / 12.5% / 12.5% into the
# parties' training rows, the public unlabelled set and a test set, and gives every
# training row a party label in ``groups``.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedkt import FedKTClassifier
from skfedkt.baselines import solo_scores
from skfedkt.datasets import load_federated

data = load_federated("digits", n_parties=10, beta=0.5, random_state=0)
for party in range(10):
    labels = np.unique(data.y_train[data.groups == party])
    print(f"party {party}: {np.sum(data.groups == party):>3} rows, digits {labels}")

# %%
# Fit FedKT like any classifier
# -----------------------------
# ``groups`` says which party holds which row and ``X_unlabeled`` is the public set.
# Each party trains 2 x 5 teachers on disjoint parts of its rows; their votes on the
# public set teach 2 students per party; the server lets the 20 students vote and trains
# the final model on their labels.
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
fedkt = FedKTClassifier(model, n_partitions=2, n_subsets=5, n_jobs=-1, random_state=0)
fedkt.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
print(f"FedKT test accuracy: {fedkt.score(data.X_test, data.y_test):.3f}")
print(f"each party sent {fedkt.upload_bytes_.mean() / 1024:.0f} KiB of student models")

# %%
# Against the baselines
# ---------------------
# *SOLO*: every party trains alone (we average their test accuracies). *PATE*: FedKT
# with a single party holding all rows (``groups=None``), the best knowledge transfer can
# do. *Centralized*: one model on all training rows, the unattainable ideal.
solo = solo_scores(model, data.X_train, data.y_train, data.groups, data.X_test,
                   data.y_test, random_state=0)
pate = clone(fedkt).fit(data.X_train, data.y_train, X_unlabeled=data.X_public)
central = clone(model).fit(data.X_train, data.y_train)
scores = {
    "SOLO (mean)": solo.mean(),
    "FedKT": fedkt.score(data.X_test, data.y_test),
    "PATE": pate.score(data.X_test, data.y_test),
    "Centralized": central.score(data.X_test, data.y_test),
}
for name, score in scores.items():
    print(f"{name:<12} {score:.3f}")

# %%
# FedKT gives every party a model about ten points better than what it could learn
# alone, in one round and without moving a single labelled row. The gap to PATE is the
# price of the label skew: a party that never saw a digit votes against it everywhere.
# The :ref:`heterogeneity example <sphx_glr_auto_examples_plot_heterogeneity.py>` shows
# how the gap narrows, without closing, as the parties' data become more alike.
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(list(scores), list(scores.values()), color=["grey", "tab:blue", "tab:green", "k"])
ax.set_ylabel("test accuracy")
ax.set_ylim(0, 1)
ax.set_title("digits, 10 parties, Dirichlet(0.5) label skew")
fig.tight_layout()
plt.show()
