"""Parameter descriptions that several methods' docstrings share, and the decorator that
puts them in (a line holding only ``$name``)."""

# parameter descriptions that several methods share, substituted for "$name" lines
_SHARED_DOCS = {
    "fit_data": """\
X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
    The training rows of all parties.
y : array-like of shape (n_samples,)
    Their labels (any type: strings, integers, booleans).
groups : array-like of shape (n_samples,), default=None
    The party of each row. ``None`` means a single party.""",
    "public_set": """\
X_unlabeled : {array-like, sparse matrix, DataFrame} or PublicSet, default=None
    The public set, of shape (n_public, n_features). FedKT and FedCT
    label it; ``None`` uses the rows of `X` without labels (no privacy). A one-shot
    ensemble uses it only to distil, with a `final_estimator`, which requires it.
    Wrap it in `PublicSet` inside cross-validation when it may have exactly as many
    rows as `X`.""",
    "party_data": """\
X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
    The party's rows.
y : array-like of shape (n_samples,)
    Their labels, all among `classes`.
party : str or int
    The party's name, as the server will know it.
classes : array-like of shape (n_classes,)
    The class labels every party and the server agreed on.""",
    "predict_data": """\
X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
    The input samples.""",
    "tier_fits": """\
tier_fits_ : list of dict
    How each tier of clones was fitted, in order: its ``tier`` name, ``clones``,
    ``path`` (``"stacked"`` or ``"per-clone"``), ``reason`` (why one by one),
    ``chunks`` (of stacked nets), ``device`` (of torch networks, else None) and
    ``seconds``. A tier of one skorch net trains stacked (see `skfedkt.set_config`).""",
    "uploads": """\
uploads : list of str, path-like, bytes or PartyUpload
    The parties' upload files.""",
    "upload_checks": """\
classes : array-like, default=None
    The agreed classes; ``None`` takes those of most uploads, and refuses the
    others naming them.
trusted : sequence of str, default=()
    Type names to load beyond scikit-learn's and XGBoost's (see
    `skfedkt.read_upload`).
min_parties : int, default=None
    If given, uploads that fail a check are left out (with a warning, and in
    ``left_out_parties_``) as long as this many parties remain; if None, any
    failure raises.
limits : skfedkt.UploadLimits, default=None
    Bounds on every file read (size, inflated size, manifest, payload objects);
    None means ``UploadLimits()``.
secure_sum : SecureCoordinator, default=None
    Under secure aggregation, the round's finished secure sum: the server takes
    its sums, and leaves out the uploads of parties that left it.""",
}


def shared_docs(method):
    """Put the shared parameter descriptions into `method`'s docstring (or a class's):
    a line holding only ``$name`` becomes ``_SHARED_DOCS[name]`` at that line's
    indentation."""
    lines = []
    for line in method.__doc__.splitlines():
        name = line.strip()[1:]
        if line.strip().startswith("$") and name in _SHARED_DOCS:
            indent = line[: len(line) - len(line.lstrip())]
            lines += [indent + part for part in _SHARED_DOCS[name].splitlines()]
        else:
            lines.append(line)
    method.__doc__ = "\n".join(lines)
    return method
