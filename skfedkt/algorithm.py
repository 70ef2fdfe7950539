"""The algorithm author's toolkit: everything an algorithm may use of skfedkt, in one module.

An algorithm written outside the package (installed as its own distribution, see
:doc:`/extending`) imports from here and from nothing private of skfedkt. What it
finds, by job:

**The contract.** `BaseFederatedClassifier`, the class to extend (its hooks and
declarations), with `Uploads` and `Releases` (what its class declares: every field a
party sends, `InClear` or `InSum`, with the validity of sums, `Validity`, checked in the
clear and proved under validated sums: `nonnegative`, `rows_summing_to` and
`one_hot_rows`),
`shared_docs` (the parameter descriptions of ``fit``'s docstring), `Plan` (the frozen
parameters its steps read, with `CloneFitting`), the contexts its steps take
(`PartyContext`, `ServerContext`, and `CheckContext`, the one both sides' checks of
what crosses take; `PartyRows`, a party context's ``data``, is `FederatedData` in
``fit``), `Party` (what ``_parties`` returns: anything with an ``upload``),
`Message` (what crosses: a `PartyUpload`) and `PartyStepResult` (what a party step
returns).

**The registry.** `Algorithm`, `Flag`, `Method`, `register` (or the
``skfedkt.algorithms`` entry point), `algorithms` (the registered ones, installed
plugins loaded), the flag types `positive` and `fraction`, and `OptionError` (flags
that contradict each other).

**What crosses, checked.** `UploadChecker`: each of its methods reads a field of one
upload and refuses it naming the party, the file and the field. Uploads reach the
server steps sorted by party name (the order of ``parties_``), in ``fit`` and on a
deployed server alike, whatever the order files arrive in.

**Fitting clones.** `fit_clones` fits a tier of `Task` (one clone each: an estimator,
its rows and labels, optional weights) in one flat parallel batch, skorch networks
stacked, with per-clone seeds (`draw_seeds`); `TierJob` says what every clone of the
tier learns from and gives back, `CloneFits` is what comes back, and
`predict_votes` the votes of fitted clones. A fitted clone is a `ClassCodeModel`
(a model and the global class codes its outputs stand for); `GlobalLabelClassifier`
gives a model trained on some classes the agreed ones; `soft_label_rows` turns class
distributions into weighted rows, for estimators that take ``sample_weight``
(`sample_weight_param`); `take_rows` and `StackedRows` index rows without copying the
rest.

**Seeds.** `derived_random_state` (a stream per role and name from the root seed),
`draw_seeds`, `seeded_clone` (a clone whose randomness a seed fixes, for estimators
with or without ``random_state``).

**Releases.** `Release`, `models_release` and `final_model_release`: what a fit lets
out, for the membership audit.

**scikit-learn's insides an estimator needs.** The constraints of
``_parameter_constraints`` (`Interval`, `StrOptions`, `Options`, `HasMethods`),
`num_samples` and `safe_indexing` (rows of any kind): scikit-learn keeps them in
private modules, and skfedkt reaches them in one place, checked on its versions.

**Tests.** `isolated_registry` (registrations within forget themselves on exit),
`served_by_flower` (the model the Flower apps serve, three SuperNodes in one process,
within `flower_task_identity`),
`in_process_grid`, `flower_context` and `flower_task_identity` (the Flower runtime's
pieces, outside it; these need the flower extra).
"""

from ._base import BaseFederatedClassifier
from ._declarations import Releases, Uploads
from ._deployment._fields import (
    InClear,
    InSum,
    Validity,
    nonnegative,
    one_hot_rows,
    rows_summing_to,
)
from ._deployment._received import UploadChecker
from ._deployment._upload import PartyUpload
from ._engine._compat import (
    HasMethods,
    Interval,
    Options,
    StrOptions,
    num_samples,
    safe_indexing,
)
from ._engine._class_codes import (
    ClassCodeModel,
    GlobalLabelClassifier,
    sample_weight_param,
    soft_label_rows,
)
from ._engine._context import (
    CheckContext,
    Message,
    Party,
    PartyContext,
    PartyRows,
    PartyStepResult,
    ServerContext,
)
from ._engine._fitting import CloneFits, Task, TierJob, fit_clones, predict_votes
from ._engine._plan import CloneFitting, Plan
from ._engine._rows import StackedRows, take_rows
from ._engine._seeds import derived_random_state, draw_seeds, seeded_clone
from ._engine._validation import FederatedData
from ._privacy._release import Release, final_model_release, models_release
from ._registry import (
    Algorithm,
    algorithms,
    Flag,
    Method,
    OptionError,
    fraction,
    isolated_registry,
    positive,
    register,
)
from ._shared_docs import shared_docs
from ._testing import flower_context, flower_task_identity, in_process_grid, served_by_flower

__all__ = [
    "Algorithm",
    "BaseFederatedClassifier",
    "CheckContext",
    "ClassCodeModel",
    "CloneFits",
    "CloneFitting",
    "FederatedData",
    "Flag",
    "GlobalLabelClassifier",
    "HasMethods",
    "InClear",
    "InSum",
    "Interval",
    "Message",
    "Method",
    "OptionError",
    "Options",
    "Party",
    "PartyContext",
    "PartyRows",
    "PartyStepResult",
    "PartyUpload",
    "Plan",
    "Release",
    "Releases",
    "ServerContext",
    "StackedRows",
    "StrOptions",
    "Task",
    "TierJob",
    "UploadChecker",
    "Uploads",
    "Validity",
    "algorithms",
    "derived_random_state",
    "draw_seeds",
    "final_model_release",
    "fit_clones",
    "flower_context",
    "flower_task_identity",
    "fraction",
    "in_process_grid",
    "isolated_registry",
    "models_release",
    "nonnegative",
    "num_samples",
    "one_hot_rows",
    "positive",
    "predict_votes",
    "register",
    "rows_summing_to",
    "safe_indexing",
    "sample_weight_param",
    "seeded_clone",
    "served_by_flower",
    "shared_docs",
    "soft_label_rows",
    "take_rows",
]
