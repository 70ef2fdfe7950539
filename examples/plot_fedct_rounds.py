"""
Federated co-training, round by round
=====================================

Five hospitals each hold a few labelled patients and want one good decision tree, but
trees cannot be averaged like neural network weights. Federated co-training (FedCT)
shares something every model can produce: hard labels on a public, unlabelled set.
Each round, every hospital labels the public set, the server takes the majority vote
(the *consensus*) and every hospital retrains on its own patients plus the public set
with the consensus labels.

We follow the paper's BreastCancer protocol: 85 labelled rows split over 5 parties, 370
public unlabelled rows, 114 test rows.
"""

# %%
# The federation
# --------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from xgboost import XGBClassifier

from skfedkt import FedCTClassifier
from skfedkt.privacy import BitFlips

X, y = load_breast_cancer(return_X_y=True)
X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=114, stratify=y,
                                                  random_state=0)
X_train, X_public, y_train, _ = train_test_split(X_rest, y_rest, train_size=85,
                                                 stratify=y_rest, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_public, X_test = (scaler.transform(a) for a in (X_train, X_public, X_test))
hospital = np.array(["A", "B", "C", "D", "E"])[np.arange(85) % 5]

tree = DecisionTreeClassifier(random_state=0)
local = np.mean([
    DecisionTreeClassifier(random_state=0)
    .fit(X_train[hospital == h], y_train[hospital == h]).score(X_test, y_test)
    for h in np.unique(hospital)
])
central = DecisionTreeClassifier(random_state=0).fit(X_train, y_train).score(X_test, y_test)
print(f"a hospital alone: {local:.3f}   all 85 rows pooled: {central:.3f}")

# %%
# Accuracy after each round
# -------------------------
# ``history_`` records, per round, how much of the consensus changed and how well the
# parties fit their own training rows. To see test accuracy per round we refit with
# ``n_rounds=r``: with a fixed ``random_state`` the first ``r`` rounds are identical, and a
# large ``n_iter_no_change`` keeps the early stop from cutting the curve short. We score
# both the federation's vote (``clf.score``) and each hospital's own tree
# (``estimators_``; they predict class codes, which here are the labels 0 and 1).
#
# With privacy, every party flips each bit of its one-hot labels with a calibrated
# probability before sharing. The default sensitivity is the worst case: one patient
# could change *every* public label (740 bits here), which makes the bits nearly random.
# Like the paper, we also try a sensitivity estimate (here: one patient changes at most
# 10 public labels, 20 bits); that is an assumption about the models, not a guarantee.
rounds = range(0, 11)
settings = {
    "no noise": None,
    "epsilon 30 per round, sensitivity 20 bits": BitFlips(30.0, sensitivity=20),
    "epsilon 30 per round, worst case": BitFlips(30.0),
}
ensemble, own_model, last = {}, {}, {}
for name, privacy in settings.items():
    ensemble[name], own_model[name] = [], []
    for r in rounds:
        clf = FedCTClassifier(tree, n_rounds=r, n_iter_no_change=100, random_state=0,
                              privacy=privacy)
        clf.fit(X_train, y_train, groups=hospital, X_unlabeled=X_public)
        ensemble[name].append(clf.score(X_test, y_test))
        own_model[name].append(np.mean([m.score(X_test, y_test) for m in clf.estimators_]))
    last[name] = clf

for name, clf in last.items():
    changed = [f"{h['consensus_changed']:.2f}" for h in clf.history_]
    print(f"{name}\n  consensus changed per round: {' '.join(changed)}")
    if clf.privacy_report_ is not None:
        print(f"  {clf.privacy_report_}")

# %%
# Reading the curves
# ------------------
# Round 0 is each hospital's tree trained alone (right) and their vote (left). Without
# noise, one round of label sharing lifts every hospital's own tree to the level of the
# federation's vote, and the consensus stops changing at once: each tree now reproduces
# the consensus. The vote itself gains little here, since the trees learn the labels it
# already gave; what co-training buys is a good model *at every hospital*.
#
# Bit-flip noise is another matter on 370 public rows. With a sensitivity estimate of 20
# bits, 30 per round keeps most shared labels right and the consensus keeps wobbling
# around a usable answer; with the worst-case sensitivity the shared bits are coin
# flips, the consensus changes by half every round and the trees learn noise. And the
# usable setting is no bargain: the printed report composes 30 per round into an
# epsilon in the hundreds over 10 rounds. Label sharing is cheap in bytes but not in
# privacy when the public set is small.
fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
for name in settings:
    axes[0].plot(list(rounds), ensemble[name], marker="o", label=name)
    axes[1].plot(list(rounds), own_model[name], marker="o", label=name)
    axes[2].plot([h["round"] for h in last[name].history_],
                 [h["consensus_changed"] for h in last[name].history_], marker="o",
                 label=name)
for ax in axes[:2]:
    ax.axhline(local, color="grey", linestyle=":", label="a hospital alone")
    ax.axhline(central, color="black", linestyle="--", label="all rows pooled")
    ax.set(xlabel="round", ylabel="test accuracy", ylim=(0.4, 1))
axes[0].set_title("The federation's vote")
axes[1].set_title("Each hospital's own tree (mean)")
axes[2].set(xlabel="round", ylabel="fraction of consensus labels changed",
            title="Convergence of the consensus")
# one legend for the three panels, below them, where it hides no curve
handles, labels = axes[1].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9)
fig.tight_layout(rect=(0, 0.08, 1, 1))
plt.show()

# %%
# A different model in every hospital
# -----------------------------------
# Labels are all that is shared, so each party may pick its own model (the paper's
# Table 3): pass a dict keyed by party.
mixed = {"A": DecisionTreeClassifier(random_state=0),
         "B": MLPClassifier(max_iter=1000, random_state=0),
         "C": LogisticRegression(),
         "D": XGBClassifier(n_estimators=50),
         "E": RandomForestClassifier(n_estimators=50, random_state=0)}
clf = FedCTClassifier(mixed, random_state=0)
clf.fit(X_train, y_train, groups=hospital, X_unlabeled=X_public)
print(f"mixed models after {clf.n_rounds_} rounds: test accuracy {clf.score(X_test, y_test):.3f}")
for name, model in zip(clf.parties_, clf.estimators_):
    print(f"  hospital {name}: {type(model).__name__:<24} "
          f"alone on the test set {model.score(X_test, y_test):.3f}")
