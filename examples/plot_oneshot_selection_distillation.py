"""
One-shot ensembles: which local models to keep, and how to shrink them
======================================================================

In one-shot federated learning every device trains a model on its own data, sends it
once, and the server combines what it gets (Guha, Talwalkar and Smith, 2019). With
thousands of devices two questions follow:

1. **Selection**: which local models should the ensemble keep? The paper compares
   keeping the models that score best on their own validation data (``"cv"``), those
   of the devices with the most data (``"data"``), a random subset (``"random"``) and
   all of them.
2. **Distillation**: an ensemble of many models is costly to ship back to devices. With
   a public set the server can train one small *student* to mimic it.

We split ``digits`` into 25 devices whose digits are skewed by a Dirichlet(0.5) draw,
and predict a binary label (digit 5-9 against 0-4), as the paper's binary tasks.
"""

# %%
# Devices, and the two reference points
# -------------------------------------
# A device with fewer than 30 rows trains nothing (the paper's threshold) and, as a
# baseline on its own, predicts a constant. The unattainable ideal pools all rows.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedkt import OneShotEnsembleClassifier
from skfedkt.datasets import dirichlet_partition

X, digit = load_digits(return_X_y=True)
X = X / 16.0
y = (digit >= 5).astype(int)
X_train, X_rest, y_train, y_rest, digit_train, _ = train_test_split(
    X, y, digit, test_size=0.4, stratify=y, random_state=0
)
X_public_pool, X_test, _, y_test = train_test_split(X_rest, y_rest, test_size=0.5,
                                                   stratify=y_rest, random_state=0)
device = dirichlet_partition(digit_train, n_parties=25, beta=0.5, min_party_size=5,
                             random_state=0)
base = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


def auc(model):
    return roc_auc_score(y_test, model.predict_proba(X_test)[:, 1])


local = []
for d in range(25):
    rows = device == d
    enough = rows.sum() >= 30 and len(np.unique(y_train[rows])) == 2
    local.append(auc(clone(base).fit(X_train[rows], y_train[rows])) if enough else 0.5)
ideal = auc(clone(base).fit(X_train, y_train))
print(f"devices with >= 30 rows: {sum(np.bincount(device) >= 30)} of 25")
print(f"mean local AUC {np.mean(local):.3f}   ideal (all data) {ideal:.3f}")

# %%
# Selection strategies
# --------------------
# ``n_selected`` is the ensemble size ``k``. Random selection is averaged over five
# draws, as in the paper.
sizes = [1, 2, 3, 5, 10]
results = {}
for selection in ["cv", "data", "random"]:
    seeds = range(5) if selection == "random" else [0]
    results[selection] = [
        np.mean([
            auc(OneShotEnsembleClassifier(base, selection=selection, n_selected=k,
                                          min_samples=30, random_state=seed)
                .fit(X_train, y_train, groups=device))
            for seed in seeds
        ])
        for k in sizes
    ]
full = OneShotEnsembleClassifier(base, min_samples=30).fit(X_train, y_train, groups=device)
results_all = auc(full)
for selection, scores in results.items():
    print(f"{selection:>6}: " + "  ".join(f"k={k}: {s:.3f}" for k, s in zip(sizes, scores)))
print(f"   all: {results_all:.3f} ({len(full.estimators_)} models)")

# %%
# Distillation against the size of the public set
# -----------------------------------------------
# The student is a kernel ridge regression that learns the ensemble's class
# probabilities on the public set (one output per class), the paper's distillation in
# the dual. Its ``decision_function`` gives the scores for the AUC.
teacher = OneShotEnsembleClassifier(base, selection="cv", n_selected=10, min_samples=30,
                                    random_state=0)
teacher_auc = auc(teacher.fit(X_train, y_train, groups=device))
public_sizes = [10, 25, 50, 100, 200, 359]
student_auc = []
for n in public_sizes:
    distilled = clone(teacher).set_params(
        distill=True, final_estimator=KernelRidge(kernel="rbf", gamma=0.02, alpha=0.1)
    )
    distilled.fit(X_train, y_train, groups=device, X_unlabeled=X_public_pool[:n])
    student_auc.append(roc_auc_score(y_test, distilled.decision_function(X_test)))
print("student AUC by public set size: "
      + "  ".join(f"{n}: {a:.3f}" for n, a in zip(public_sizes, student_auc)))

# %%
# What the plots say
# ------------------
# Left: every ensemble of a few models beats the mean device by a wide margin, since
# most devices have too little data, or too few digits, to generalise. With a single
# model, the device that validates best is by far the safest pick; from three models
# on, the largest devices do as well. Here the full ensemble of all 21 trained models
# is best of all: the paper saw the same on its smallest network (Gleam, 38 devices),
# while on thousands of devices its selected ensembles beat the full one. It stays
# below the pooled ideal because each model saw only a few digits. Right: the student
# needs only a few hundred unlabelled public rows to come within a hair of its
# teacher, and ships as one model instead of ten. Each fit warns that some devices hold
# fewer than 10 rows: they are the small devices the paper has in mind, and the
# selection strategies are what copes with them. The other warnings above come from the
# smallest public sets, of a few dozen rows or fewer: there the ensemble labels class 1
# on 10-20% of the public rows, against its half of the training rows, and the student
# learns those labels.
fig, (ax_sel, ax_dist) = plt.subplots(1, 2, figsize=(11, 4))
for selection, scores in results.items():
    ax_sel.plot(sizes, scores, marker="o", label=f"selection='{selection}'")
ax_sel.axhline(results_all, color="tab:purple", linestyle="-.", label="all models")
ax_sel.axhline(np.mean(local), color="grey", linestyle=":", label="mean local model")
ax_sel.axhline(ideal, color="black", linestyle="--", label="ideal (all data pooled)")
ax_sel.set(xlabel="ensemble size k", ylabel="test ROC AUC", title="Ensemble selection")
ax_sel.legend(fontsize=8)
ax_dist.plot(public_sizes, student_auc, marker="o", label="distilled student")
ax_dist.axhline(teacher_auc, color="tab:orange", linestyle="--", label="ensemble (teacher)")
ax_dist.set(xlabel="public rows", ylabel="test ROC AUC", xscale="log",
            title="Distillation on the public set")
ax_dist.legend()
fig.tight_layout()
plt.show()
