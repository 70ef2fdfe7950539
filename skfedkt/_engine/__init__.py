"""The shared engine, used alike by every algorithm's party and server steps.

- `_base`: the base class of the meta-estimators: input and party validation, label
  encoding, tags, collapse warnings.
- `_fitting`: fitting many clones of base estimators in one flat parallel batch, each
  with its own seed and on class codes it can digest; their votes on a public set.
- `_stacking`: a tier's clones of one skorch net trained together as one stacked
  module, each as its own fit would train it (imported only for torch networks).
- `_seeds`: the seeds every party and the server derive from ``random_state``.
- `_augment`: jittered copies of the public rows.
- `_voting`: vote counting, tie breaks and the pooling of votes across parties.
"""
