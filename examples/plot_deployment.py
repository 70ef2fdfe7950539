"""
Three hospitals and a server, through files
===========================================

``fit`` simulates a federation in one process. Across organisations, each hospital runs
the *party step* on its own machine and sends a file; the coordinator runs the *server
step* on the files. This example plays all four roles in one script, with a temporary
folder as the network, and checks that the deployed model is the one ``fit`` gives.
"""

# %%
# What everyone agrees on beforehand
# ----------------------------------
# The algorithm and its parameters (including ``random_state``), the class labels and
# the public unlabelled set. Every upload carries these in its manifest, and the server
# refuses an upload that disagrees.
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from skfedkt import FedCTClassifier, FedKTClassifier, OneShotEnsembleClassifier
from skfedkt.datasets import load_federated

data = load_federated("breast_cancer", n_parties=3, beta=0.5, random_state=0)
hospitals = {p: (data.X_train[data.groups == p], data.y_train[data.groups == p])
             for p in range(3)}
classes = [0, 1]
network = Path(tempfile.mkdtemp())

# %%
# FedKT: one round
# ----------------
# Each hospital trains its teachers and students on its own rows and uploads only its
# students, serialised with skops (no pickle), next to a manifest.
fedkt = FedKTClassifier(RandomForestClassifier(n_estimators=50, max_depth=6),
                        random_state=0)
uploads, seconds = [], {}
for party, (X, y) in hospitals.items():
    start = time.perf_counter()
    upload = fedkt.fit_party(X, y, party=party, classes=classes,
                             X_unlabeled=data.X_public)
    seconds[f"party {party}"] = time.perf_counter() - start
    path = network / f"fedkt-{party}.skfedkt"
    print(f"hospital {party}: {len(y)} rows -> {path.name}, {upload.save(path):,} bytes")
    uploads.append(path)
print(upload.manifest["params"]["voting"], upload.manifest["classes"],
      upload.manifest["public_fingerprint"][:16])

# %%
# The server checks every manifest and the types in every payload before loading it,
# then lets the students vote on the public set and trains the final model. An
# uploaded row count is its party's own claim, so where the server pools the votes no
# party weighs more than the other parties together: one hospital here holds more rows
# than the other two, and the server says that it weighs it a little less than its
# rows (the warning below). ``fit`` bounds it alike, without a word, as its counts are
# the data's: the two models are the same.
start = time.perf_counter()
server = clone(fedkt).fit_server(uploads, data.X_public)
seconds["server"] = time.perf_counter() - start
simulated = clone(fedkt).fit(data.X_train, data.y_train, groups=data.groups,
                             X_unlabeled=data.X_public)
print("same model as fit:", np.array_equal(server.predict_proba(data.X_test),
                                           simulated.predict_proba(data.X_test)))
print(f"accuracy {server.score(data.X_test, data.y_test):.3f}; seconds per step",
      {step: round(s, 2) for step, s in seconds.items()})

# %%
# A tampered upload is refused, naming the party and the field
# -------------------------------------------------------------
# Here hospital 1's file is cut short on its way.
damaged = network / "fedkt-1-damaged.skfedkt"
damaged.write_bytes(uploads[1].read_bytes()[:20_000])
try:
    clone(fedkt).fit_server([uploads[0], damaged, uploads[2]], data.X_public)
except ValueError as error:
    # the message names the file; its temporary folder is shortened to "network"
    print(str(error).replace(str(network), "network"))

# %%
# With ``min_parties`` the server may go on without it, and says so.
partial = clone(fedkt).fit_server([uploads[0], damaged, uploads[2]], data.X_public,
                                  min_parties=2)
print("left out:", list(partial.left_out_parties_))

# %%
# One-shot ensembles: one round; FedCT: rounds of labels
# -------------------------------------------------------
# A one-shot party sends its local model (and, for ``selection="cv"``, its held-out
# score). A FedCT party sends its labels of the public set every round, and the
# server's consensus message goes back to every party; when the server says done,
# each party sends its final model.
oneshot = OneShotEnsembleClassifier(RandomForestClassifier(n_estimators=50, max_depth=6),
                                    selection="cv", n_selected=2, random_state=0)
oneshot_uploads = [oneshot.fit_party(X, y, party=p, classes=classes).to_bytes()
                   for p, (X, y) in hospitals.items()]
oneshot_server = clone(oneshot).fit_server(oneshot_uploads)

fedct = FedCTClassifier(DecisionTreeClassifier(max_depth=4), random_state=0)
coordinator, message, label_bytes = clone(fedct), None, []
while True:
    round_uploads = [fedct.fit_party(X, y, party=p, classes=classes,
                                     X_unlabeled=data.X_public, message=message)
                     for p, (X, y) in hospitals.items()]
    if message is not None and message.manifest["done"]:
        break
    label_bytes.append(np.mean([len(u.to_bytes()) for u in round_uploads]))
    message = coordinator.server_round(round_uploads, data.X_public, message=message)
coordinator.fit_server(round_uploads, data.X_public, message=message)
print(f"FedCT: {coordinator.n_rounds_} rounds, accuracy "
      f"{coordinator.score(data.X_test, data.y_test):.3f}")

# %%
# What each party sends
# ---------------------
sizes = {
    "FedKT\n(students)": np.mean(server.upload_bytes_),
    "one-shot\n(local model)": np.mean(oneshot_server.upload_bytes_),
    "FedCT\n(labels, per round)": np.mean(label_bytes),
    "FedCT\n(final model)": np.mean([len(u.to_bytes()) for u in round_uploads]),
}
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar(list(sizes), [s / 1000 for s in sizes.values()], color="tab:blue")
ax.set_yscale("log")
ax.set_ylabel("kB per party (upload file)")
ax.set_title("Upload size per party")
fig.tight_layout()
plt.show()
