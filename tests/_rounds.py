"""The deployed rounds of an algorithm with rounds, through upload files: what the
tests compare with ``fit``."""

import numpy as np
from sklearn.base import clone


def fit_through_files(clf, X, y, party, folder, X_public=None):
    """Every party's ``fit_party`` and the server's ``server_round``, round after round
    through files in `folder` until the server says done, then ``fit_server``: the
    fitted server estimator, and the final round's upload files."""
    message, round_ = None, 0
    while True:
        uploads = []
        for p in np.unique(party):
            path = folder / f"party-{p}-round-{round_}.skfedkt"
            clf.fit_party(X[party == p], y[party == p], party=p, classes=np.unique(y),
                          X_unlabeled=X_public, message=message).save(path)
            uploads.append(path)
        if message is not None and message.manifest["done"]:
            server = clone(clf).fit_server(uploads, X_public, message=message)
            return server, uploads
        message = clf.server_round(uploads, X_public, message=message)
        round_ += 1
