"""
What the coordinator holds: with and without secure aggregation
================================================================

Every algorithm sends what the server sums *in the sum*; without secure aggregation the
server adds the parties' sums in the clear, and also holds what each party sends in the
clear (FedKT's students). Under ``skfedkt.config_context(secure_aggregation=True)`` a
secure sum adds them masked: the coordinator holds their total, and nothing of any one
party. The model is the same. This example compares what the coordinator holds in
both, attacks each with a membership audit, and then plays a coordinator that deviates
from the protocol, which the parties refuse.
"""

# %%
# Five hospitals, one model
# -------------------------
# breast_cancer in five Dirichlet(0.5) parties. FedKT's default, fitted both ways: the
# same public labels, the same predictions.
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier

import skfedkt
from skfedkt import (
    FedKTClassifier,
    InputLedger,
    PartyIdentity,
    SecureCoordinator,
)
from skfedkt.datasets import load_federated
from skfedkt.privacy import membership_audit

data = load_federated("breast_cancer", n_parties=5, random_state=0)
clf = FedKTClassifier(RandomForestClassifier(n_estimators=10, max_depth=6), random_state=0)
fitted = {}
for name, secure in (("plain", False), ("secure", True)):
    with warnings.catch_warnings(), skfedkt.config_context(secure_aggregation=secure):
        warnings.simplefilter("ignore")  # the label skew's collapse warnings
        fitted[name] = clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                                      X_unlabeled=data.X_public)
plain, secure = fitted["plain"], fitted["secure"]
print("same predictions:", bool((plain.predict(data.X_test)
                                 == secure.predict(data.X_test)).all()))
print("accuracy:", round(plain.score(data.X_test, data.y_test), 3))

# %%
# What the coordinator holds
# --------------------------
# Without secure aggregation the coordinator holds each party's students and its sums
# (its students' votes on the public rows and its class counts, in the clear). Under it,
# the students stay at their parties, and what each party sends is the secure sum's
# messages: keys, sealed shares, masked words and unmasking shares. A membership audit
# attacks every release the coordinator holds: each party's upload (its students)
# without it, the final model alone under it.
audits = {}
for name, model in fitted.items():
    with warnings.catch_warnings(), skfedkt.config_context(
            secure_aggregation=name == "secure"):
        warnings.simplefilter("ignore")
        audits[name] = membership_audit(
            model, data.X_train, data.y_train, groups=data.groups,
            X_unlabeled=data.X_public, X_holdout=data.X_test, y_holdout=data.y_test,
            n_reference=0, random_state=0)
    print(f"\n{name}: students at the coordinator:",
          sum(len(students) for students in model.students_))
    print(audits[name])

fig, (sent, attacked) = plt.subplots(1, 2, figsize=(9, 3.4))
sent.bar(["plain", "secure"], [plain.upload_bytes_.mean() / 1024,
                               secure.upload_bytes_.mean() / 1024])
sent.set_ylabel("KiB each party sent")
releases = ["upload", "final model"]
for offset, name in ((-0.2, "plain"), (0.2, "secure")):
    aucs = [np.mean([r.auc for r in audits[name].results if r.release == release])
            if any(r.release == release for r in audits[name].results) else np.nan
            for release in releases]
    attacked.bar(np.arange(len(releases)) + offset, aucs, 0.4, label=name)
attacked.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
attacked.set_xticks(np.arange(len(releases)), releases)
attacked.set_ylabel("loss attack AUC (0.5: a guess)")
attacked.set_ylim(0.4, 0.8)
attacked.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# A deployment, and a coordinator that deviates
# ---------------------------------------------
# In a deployment each party holds its identity key and a ledger of what it helped
# unmask; the consortium agrees a session naming every party's public key. Here the
# five parties run ``fit_party`` and a `SecureCoordinator` runs their secure sum, in one
# process, each message as a deployment sends it.
names = list(range(5))  # as in fit: the model fit gives
identities = [PartyIdentity.generate() for _ in names]  # one at each party
folder = Path(tempfile.mkdtemp())
ledgers = {name: InputLedger(folder / f"ledger-{name}.json") for name in names}
rows = np.bincount(data.groups).tolist()
public_keys = [key.public_bytes for key in identities]


def party_steps(session, parties):
    """The secure uploads of `parties` (indices) for `session`."""
    with skfedkt.config_context(secure_aggregation=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [clf.fit_party(data.X_train[data.groups == p], data.y_train[data.groups == p],
                              party=names[p], classes=plain.classes_,
                              X_unlabeled=data.X_public, secure_session=session,
                              identity=identities[p]) for p in parties]


def secure_sum(session, uploads):
    """The coordinator's stages, each answered by the parties."""
    states = {upload.party: upload.secure_state for upload in uploads}
    coordinator, out = SecureCoordinator.start(session, [u.manifest for u in uploads])
    while coordinator.stage != "done":
        out = coordinator.advance([states[name].answer(message, ledgers[name])
                                   for name, message in out.items()])
    return coordinator


session = clf.secure_session(names, rows, identities=public_keys)
uploads = party_steps(session, range(5))
coordinator = secure_sum(session, uploads)
with skfedkt.config_context(secure_aggregation=True), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    deployed = clone(clf).fit_server(uploads, data.X_public, secure_sum=coordinator)
print("survivors:", coordinator.survivors, "- the model fit gives:",
      bool((deployed.predict(data.X_test) == plain.predict(data.X_test)).all()))

# %%
# One input, one sum
# ------------------
# A coordinator that then runs a second session over the same parties' inputs without
# party 0 would learn its input from the difference of the two sums. Every other party's
# ledger knows its input was unmasked with five survivors, and refuses to unmask it
# with four: the sum cannot finish.
second = clf.secure_session(names, rows, identities=public_keys)
try:
    secure_sum(second, party_steps(second, range(1, 5)))
except ValueError as refusal:
    print(refusal)
