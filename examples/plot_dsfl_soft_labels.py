"""
Soft labels round by round: DS-FL against FedCT
===============================================

Ten parties hold skewed shares of the ``digits`` classes and want one model of trees.
FedCT shares hard labels of a public set every round; DS-FL
(:class:`~skfedkt.DSFLClassifier`) shares class probabilities, which the server averages
into *soft labels*, and every party learns its own rows beside them. We follow both,
round by round, and look at what each round's soft labels teach.
"""

# %%
# The federation
# --------------
# ``load_federated`` splits ``digits`` into 10 Dirichlet(0.5) parties, a public set and
# a test set. Every party fits a small random forest, which takes ``sample_weight`` as
# DS-FL needs.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.ensemble import RandomForestClassifier

from skfedkt import AssumptionWarning, DSFLClassifier, FedCTClassifier
from skfedkt.datasets import load_federated

data = load_federated("digits", n_parties=10, beta=0.5, random_state=0)
model = RandomForestClassifier(n_estimators=20, random_state=0)
central = RandomForestClassifier(n_estimators=20, random_state=0).fit(
    data.X_train, data.y_train).score(data.X_test, data.y_test)
print(f"one model on all training rows (not federated): {central:.3f}")

# %%
# Accuracy after each round
# -------------------------
# With a fixed ``random_state`` the first ``r`` rounds of a fit with ``n_rounds=r + 1``
# are those of one with ``n_rounds=r``, so refitting with more rounds traces the curve;
# ``tol=0`` keeps the early stop from cutting it short. Round 0 is the parties' own
# models alone.
rounds = range(0, 4)
scores = {"DS-FL, the parties' vote": [], "DS-FL, distilled": [],
          "FedCT, the parties' vote": []}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", AssumptionWarning)
    for r in rounds:
        for name, clf in (
            ("DS-FL, the parties' vote", DSFLClassifier(model, n_rounds=r, tol=0)),
            ("DS-FL, distilled", DSFLClassifier(model, n_rounds=max(r, 1), tol=0,
                                                distill=True)),
            ("FedCT, the parties' vote", FedCTClassifier(model, n_rounds=r,
                                                         n_iter_no_change=100)),
        ):
            clf.set_params(random_state=0)
            clf.fit(data.X_train, data.y_train, groups=data.groups,
                    X_unlabeled=data.X_public)
            scores[name].append(clf.score(data.X_test, data.y_test))

for name, accuracy in scores.items():
    print(name, " ".join(f"{a:.3f}" for a in accuracy))
fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
for name, accuracy in scores.items():
    ax.plot(list(rounds), accuracy, marker="o", label=name)
ax.axhline(central, color="gray", linestyle="--", label="one model on all rows")
ax.set(xlabel="rounds after the parties' own models", ylabel="test accuracy",
       xticks=list(rounds))
ax.legend(fontsize="small")
plt.show()

# %%
# The parties' vote learns from two sources: each party's model saw its own rows and the
# federation's soft labels, so averaging them pools both. Its round 0 is already the soft
# vote of the parties' own forests, where FedCT's is their hard vote. The distilled model
# learns the soft labels of the public rows alone, a few hundred here: it is the one that
# runs under secure aggregation, and the public set bounds it (see the user guide's page
# on DS-FL and the choosing page's measurements).

# %%
# What the soft labels hold
# -------------------------
# ``soft_labels_`` are the last round's averaged probabilities of the public rows, one
# distribution a row. A hard label keeps only its top class; the soft label also says how
# sure the federation is, and which class comes second.
clf = DSFLClassifier(model, n_rounds=3, random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", AssumptionWarning)
    clf.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
top = np.sort(clf.soft_labels_, axis=1)[:, ::-1]
print(f"public rows: {len(top)}; mean probability of the top class: {top[:, 0].mean():.2f}, "
      f"of the second: {top[:, 1].mean():.2f}")
for entry in clf.history_:
    print(f"round {entry['round']}: the soft labels moved {entry['soft_labels_changed']:.3f}"
          f", the parties fit their own rows at {entry['train_accuracy']:.3f}")
