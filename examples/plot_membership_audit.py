"""
What an attacker learns: a membership audit of every release
=============================================================

Parties keep their rows, but what they send can still give those rows away: a model
that memorised a row answers it with more confidence than a row it never saw. A
*membership-inference attack* tries to tell a party's training rows (members) from other
rows of the same population (non-members); its ROC AUC is 0.5 when it can only guess.

:func:`skfedkt.privacy.membership_audit` runs two such attacks against every release of
a fitted estimator (each party's upload, the final model): the loss-threshold attack of
Yeom et al., and offline LiRA (Carlini et al.), which refits the whole federation with
the attacked rows swapped for others and compares. Here it audits three hospitals'
uploads under four configurations.
"""

# %%
# Three hospitals and a public set
# --------------------------------
# breast_cancer split 40/20/40: three Dirichlet(0.5) parties hold the training rows, 20%
# is the public unlabelled set, and the last 40% are rows no party holds: half of them
# serve as non-members, half as the stand-ins of LiRA's reference fits.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from skfedkt import FedKTClassifier, OneShotEnsembleClassifier
from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import PartyNoise, membership_audit

X, y = load_breast_cancer(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.4, stratify=y,
                                                    random_state=0)
X_public, X_holdout, _, y_holdout = train_test_split(X_rest, y_rest, train_size=1 / 3,
                                                     stratify=y_rest, random_state=0)
party = dirichlet_partition(y_train, n_parties=3, beta=0.5, random_state=0)
print("rows per hospital:", np.bincount(party))

# %%
# Four ways to federate
# ---------------------
# A one-shot ensemble ships each hospital's forest itself. FedKT ships *students*: by
# default they learn only the teachers' labels of the public set (and of jittered copies
# of it), so a hospital's rows shape its upload only through those labels. With
# ``student_data="party+public"`` the students also learn the hospital's own rows, which
# the package allows as an explicit choice and says so in the privacy report. At L2,
# Laplace noise on every teacher vote makes each upload differentially private.
forest = RandomForestClassifier(n_estimators=25, random_state=0)
configurations = {
    "one-shot: local forest": OneShotEnsembleClassifier(forest, selection="all"),
    "FedKT, students learn party rows": FedKTClassifier(forest, student_data="party+public"),
    "FedKT (default)": FedKTClassifier(forest),
    "FedKT L2 (gamma 0.1, 40 queries)": FedKTClassifier(
        forest, privacy=PartyNoise(gamma=0.1, query_fraction=40 / len(X_public))),
}
audits = {}
for name, clf in configurations.items():
    clf.set_params(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # collapse warnings of the small private fit
        clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
        audits[name] = membership_audit(
            clf, X_train, y_train, groups=party, X_unlabeled=X_public,
            X_holdout=X_holdout, y_holdout=y_holdout, n_reference=4, random_state=0,
        )
    print(f"\n{name}: test accuracy {clf.score(X_holdout, y_holdout):.3f}")
    print(audits[name])

# %%
# The uploads, side by side
# -------------------------
# Each bar is the attacks' AUC on the uploads, averaged over the three hospitals (lines:
# the lowest and highest hospital). The shipped forest and the students that learned
# their hospital's rows give rows away; the default students leave the attacker close to
# a guess, and at L2 the accountant's epsilon also bounds what any attack can reach
# (``auc_bound`` in the audit's summary).
fig, ax = plt.subplots(figsize=(7, 3.5))
width = 0.38
for offset, attack in ((-width / 2, "loss"), (width / 2, "lira")):
    means, lows, highs = [], [], []
    for audit in audits.values():
        aucs = [r.auc for r in audit.results if r.release == "upload" and r.attack == attack]
        means.append(np.mean(aucs))
        lows.append(np.mean(aucs) - min(aucs))
        highs.append(max(aucs) - np.mean(aucs))
    ax.bar(np.arange(len(audits)) + offset, means, width, yerr=[lows, highs], capsize=3,
           label={"loss": "loss-threshold attack", "lira": "LiRA (4 reference fits)"}[attack])
ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
ax.set_xticks(np.arange(len(audits)), [name.replace(": ", ":\n").replace(", ", ",\n")
                                        for name in audits], fontsize=8)
ax.set_ylabel("attack AUC on the uploads")
ax.set_ylim(0.3, 1.0)
ax.legend(loc="upper right", fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Before sending an upload
# ------------------------
# A hospital can run the same audit on its own upload alone, with
# :func:`skfedkt.privacy.party_membership_audit` or ``skfedkt audit`` on the command
# line, with nothing but its own rows and some it did not train on. A low AUC is no proof
# of privacy (the attacks query the models; whoever holds a model also holds its
# parameters), a high one is a proven leak.
