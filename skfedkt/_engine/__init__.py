"""The shared engine, used alike by every algorithm's party and server steps; each module
one job (``doc/architecture.rst`` draws them):

- `_fitting`: a tier of clones of base estimators fitted in one flat parallel batch,
  each with its own seed and on class codes it can digest, and the one choice of the
  tier's path; their votes on a public set.
- `_stacking`: a tier's clones of one skorch net trained together as one stacked
  module, each as its own fit would train it (imported only for torch networks).
- `_weights`: FedAvg's weights, read and written, and training from them.
- `_transport`: the parallel batch, what crosses to its workers and back.
- `_class_codes`: a fitted clone and the global class codes its outputs stand for.
- `_seeds`: the seeds every party and the server derive from ``random_state``, and
  clones seeded by them.
- `_rows`: rows stacked and taken; `_nets`: questions about skorch nets.
- `_validation`: what a fit receives, and the warnings about it.
- `_context`, `_plan`: the steps' contexts and the frozen plan.
- `_augment`: jittered copies of the public rows.
- `_compat`: every use of torch's, skorch's, cloudpickle's and scikit-learn's private
  insides, checked against their versions.
- `_voting`: vote counting, tie breaks and the pooling of votes across parties.
"""
