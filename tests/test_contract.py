"""The algorithm contract in code: every hook is declared in `BaseFederatedClassifier`,
a class that lacks one is refused naming it, and a small algorithm written here, in the
test folder only, runs through `fit`, the deployed party and server steps, the command
line's ``skfedkt party`` and ``server`` (declared to the registry as its package
would), the Flower apps and the membership audit."""

from dataclasses import dataclass
from numbers import Integral
from typing import ClassVar

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils._param_validation import HasMethods

from _flower_grid import flower_task  # noqa: F401  (a fixture)

from skfedkt import PartyUpload
from skfedkt.privacy import membership_audit
from skfedkt._base import BaseFederatedClassifier, InClear, Releases, Uploads
from skfedkt._engine._context import PartyStepResult
from skfedkt._engine._class_codes import ClassCodeModel
from skfedkt._engine._fitting import ensemble_proba
from skfedkt._engine._plan import Plan
from skfedkt._engine._seeds import draw_seeds
from skfedkt._privacy._release import final_model_release


@dataclass(frozen=True)
class LocalVotePlan(Plan):
    estimator: object = None

    estimator_name: ClassVar[str] = "LocalVoteClassifier"

    upload_kind = "local model"

    @classmethod
    def of(cls, estimator):
        return cls(n_jobs=estimator.n_jobs, verbose=estimator.verbose,
                   estimator=estimator.estimator)

    @property
    def public_set_use(self):
        return None  # the parties' own models alone

    def uploaded_estimators(self, party):
        return [self.estimator]


def check_upload(context, final):
    def check(checker):
        checker.rows_and_counts()
        checker.optional_model()
    return check


class LocalVoteClassifier(BaseFederatedClassifier):
    """A plain vote of the parties' local models: each party fits one model on its
    rows and uploads it; the server averages their probabilities."""

    _plan_type = LocalVotePlan
    _uploads = Uploads(check=check_upload,
                       sent_bytes=lambda clf: np.zeros(len(clf.parties_)),
                       fields=(InClear("model", "its local model", party_only=True),
                               InClear("codes", "its model's class codes", party_only=True),
                               InClear("class_counts", "its rows of each class", "manifest",
                                       party_only=True)))
    _releases = Releases(of_fit=lambda clf: [final_model_release(clf)],
                         of_upload=lambda clf, upload, n_classes: [])
    _private_fitted = ("_models",)
    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict_proba"])],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, *, n_jobs=None, random_state=None, verbose=0):
        self.estimator = estimator
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self):
        return [self.estimator]

    def _parties(self, context, random_state_of):
        # a party's draws are made here, at once (see the hook's description)
        return [(party, rows, draw_seeds(random_state_of(party), 1)[0]) for party, rows
                in zip(context.data.parties, context.data.party_rows)]

    def _party_step(self, context, parties):
        data, uploads = context.data, []
        for (party, rows, seed), manifest in zip(parties, context.manifests):
            model = clone(context.plan.estimator).set_params(random_state=int(seed))
            codes = np.unique(data.y[rows])
            model.fit(data.X[rows], np.searchsorted(codes, data.y[rows]))
            uploads.append(PartyUpload(
                manifest=dict(manifest, class_counts=np.bincount(
                    data.y[rows], minlength=len(data.classes)).tolist()),
                payload={"model": model, "codes": codes}))
        return PartyStepResult(uploads)

    def _server_step(self, context, uploads):
        return {"_models": [upload.model() for upload in uploads]}

    def _proba(self, X):
        return ensemble_proba(self._models, X, len(self.classes_), "soft")

    def _predict_codes(self, X):
        return self._proba(X).argmax(axis=1)


def test_a_class_that_lacks_a_hook_is_refused_naming_it():
    class Forgetful(LocalVoteClassifier):
        _party_step = BaseFederatedClassifier._party_step
        _proba = BaseFederatedClassifier._proba

    with pytest.raises(TypeError, match="_party_step") as refusal:
        Forgetful(DecisionTreeClassifier())
    assert "_proba" in str(refusal.value)

    class NoDeclarations(BaseFederatedClassifier):
        _base_estimators = LocalVoteClassifier._base_estimators
        _parties = LocalVoteClassifier._parties
        _party_step = LocalVoteClassifier._party_step
        _server_step = LocalVoteClassifier._server_step
        _proba = LocalVoteClassifier._proba
        _predict_codes = LocalVoteClassifier._predict_codes

    with pytest.raises(TypeError, match="does not declare _plan_type, _uploads, _releases"):
        NoDeclarations()


def test_a_class_without_the_common_parameters_is_refused_naming_them():
    # the command line passes verbose=1, n_jobs and random_state to every algorithm
    class Quiet(LocalVoteClassifier):
        def __init__(self, estimator, *, n_jobs=None, random_state=None):
            super().__init__(estimator, n_jobs=n_jobs, random_state=random_state)

    with pytest.raises(TypeError, match=r"Quiet.__init__ does not take verbose: every "
                       r"algorithm's constructor takes estimator, n_jobs, random_state, "
                       r"verbose"):
        Quiet(DecisionTreeClassifier())


def test_an_algorithm_with_rounds_must_define_its_round_hooks():
    with pytest.raises(TypeError,
                       match=r"runs rounds.*_server_round and _uploads.message_check"):
        class Rounds(LocalVoteClassifier):  # noqa: F841
            runs_rounds = True


OPTIONAL_HOOKS = ("_server_round", "_after_fit", "_offers", "_decision_scores")


def test_every_hook_is_declared_in_the_base_class_and_annotated():
    """At most ten algorithm-facing hooks; what an upload holds, how it is checked, what
    a fit lets out and the command line's words are declarations (`Uploads`,
    `Releases`, the plan, the registry)."""
    import inspect

    hooks = {"_base_estimators", "_parties", "_party_step", "_server_step",
             "_predict_codes", "_proba"}
    assert BaseFederatedClassifier.__abstractmethods__ == hooks
    assert len(hooks) + len(OPTIONAL_HOOKS) <= 10
    for optional in OPTIONAL_HOOKS:
        assert callable(getattr(BaseFederatedClassifier, optional))
    unannotated = []
    for name in sorted(hooks | set(OPTIONAL_HOOKS)):
        function = getattr(BaseFederatedClassifier, name)
        signature = inspect.signature(function)
        unannotated += [f"{name}({parameter})" for parameter in signature.parameters
                        if parameter != "self"
                        and signature.parameters[parameter].annotation is inspect._empty]
        if signature.return_annotation is inspect._empty:
            unannotated.append(f"{name} -> ?")
    assert unannotated == []


def test_the_algorithms_define_only_hooks_and_declarations():
    """What an algorithm class defines of the base's private names is a hook or a
    declaration: nothing else of the base is overridden."""
    from skfedkt._base import _DECLARATIONS
    from skfedkt._registry import algorithms

    allowed = {*BaseFederatedClassifier.__abstractmethods__, *OPTIONAL_HOOKS,
               *_DECLARATIONS, "_private_fitted", "_parameter_objects", "_secure_sums",
               "_parameter_constraints", "_abc_impl"}
    for declared in algorithms():
        own = {name for name in vars(declared.estimator_class) if name.startswith("_")
               and not name.startswith("__") and hasattr(BaseFederatedClassifier, name)}
        assert own <= allowed, (declared.name, own - allowed)


def test_an_algorithm_of_the_test_folder_runs_in_process_and_deployed(tmp_path):
    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(len(y)) % 3
    clf = LocalVoteClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
    pooled = clone(clf).fit(X, y, groups=party)
    assert pooled.score(X, y) > 0.9

    paths = []
    for name in range(3):
        upload = clf.fit_party(X[party == name], y[party == name], party=name,
                               classes=[0, 1])
        paths.append(tmp_path / f"upload-{name}.skfedkt")
        upload.save(paths[-1])
    server = clone(clf).fit_server(paths)
    assert_array_equal(server.predict_proba(X), pooled.predict_proba(X))
    assert_array_equal(server.parties_, [0, 1, 2])
    assert isinstance(server._models[0], ClassCodeModel)

    audit = membership_audit(pooled, X[:400], y[:400], groups=party[:400],
                             X_holdout=X[400:], y_holdout=y[400:], n_reference=0)
    assert {result.release for result in audit.results} == {"final model"}


@pytest.fixture
def local_vote_declared(monkeypatch):
    """LocalVoteClassifier declared to the registry as an algorithm package declares
    itself (one `register` call), for this test only."""
    from skfedkt import _registry
    from skfedkt._registry import Flag

    monkeypatch.setattr(_registry, "_ALGORITHMS", dict(_registry._ALGORITHMS))
    return _registry.register(_registry.Algorithm(
        name="localvote", estimator_class=LocalVoteClassifier, title="local vote",
        flags=(Flag("--vote-depth", "the depth of every party's tree (dt only)",
                    type=int),),
    ))


def test_the_algorithm_of_the_test_folder_runs_through_the_command_line(
        local_vote_declared, tmp_path, capsys):
    from skfedkt import load_model
    from skfedkt._cli._main import main

    assert main(["split", "breast_cancer", "--parties", "3", "--out-dir", str(tmp_path)]) == 0
    uploads = []
    for name in range(3):
        uploads.append(str(tmp_path / f"upload-{name}"))
        assert main(["party", "localvote", "--estimator", "dt", "--data",
                     str(tmp_path / f"party-{name}.csv"), "--classes", "0", "1", "--name",
                     str(name), "--out", uploads[-1]]) == 0
    assert "rows, local model in" in capsys.readouterr().out
    model = str(tmp_path / "model.skops")
    assert main(["server", "localvote", "--estimator", "dt", "--out", model, *uploads]) == 0
    assert "final model of 3 parties (0, 1, 2)" in capsys.readouterr().out
    # its declaration is what model files trust: no type is trusted by hand
    served = load_model(model)

    X = np.loadtxt(tmp_path / "test.csv", delimiter=",", skiprows=1)[:, :-1]
    rows = [np.loadtxt(tmp_path / f"party-{p}.csv", delimiter=",", skiprows=1)
            for p in range(3)]
    fitted = LocalVoteClassifier(DecisionTreeClassifier(), random_state=0).fit(
        np.vstack(rows)[:, :-1], np.concatenate([r[:, -1] for r in rows]).astype(int),
        groups=np.repeat(np.arange(3), [len(r) for r in rows]))
    assert_array_equal(served.predict_proba(X), fitted.predict_proba(X))
    # the deployment commands list it, the runner's algorithms do not (it has no methods)
    assert main(["party", "--help"]) == 0
    assert "localvote" in capsys.readouterr().out


def test_the_algorithm_of_the_test_folder_runs_through_the_flower_apps(flower_task):
    """The Flower apps ask the estimator, not the registry: no declaration needed."""
    from _flower_grid import N_PARTIES, served_by_flower

    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(len(y)) % N_PARTIES
    clf = LocalVoteClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
    served = served_by_flower(clf, X, y, party, None)
    fitted = clone(clf).fit(X, y, groups=party)
    assert_array_equal(served.predict_proba(X), fitted.predict_proba(X))


@pytest.fixture
def two_rounds_flags(monkeypatch):
    """LocalVoteClassifier declared with a --rounds flag of its own, which FedCT also
    declares, and a flag no other algorithm has."""
    from skfedkt import _registry
    from skfedkt._registry import Flag, positive

    monkeypatch.setattr(_registry, "_ALGORITHMS", dict(_registry._ALGORITHMS))
    seen = []

    def options(values):
        seen.append(values)
        return {}

    _registry.register(_registry.Algorithm(
        name="localvote", estimator_class=LocalVoteClassifier, title="local vote",
        flags=(Flag("--rounds", "rounds of nothing (a test)", type=positive(int), default=7),
               Flag("--vote-depth", "the depth of every party's tree", type=int)),
        options=options))
    return seen


def test_two_algorithms_may_declare_one_flag_each_parsing_it_their_way(
        two_rounds_flags, capsys):
    from skfedkt._cli._main import build_parser
    from skfedkt._cli._flags import algorithm_options

    parser = build_parser()  # no "conflicting option string"
    args = parser.parse_args(["run", "--rounds", "3"])
    options = algorithm_options(args)
    assert options["fedct"]["n_rounds"] == 3
    assert two_rounds_flags[-1].rounds == 3
    args = parser.parse_args(["run"])
    options = algorithm_options(args)
    assert options["fedct"]["n_rounds"] == 20 and two_rounds_flags[-1].rounds == 7
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "fedct: largest number of co-training rounds (default: 20); dsfl: largest " \
           "number of rounds of soft labels (default: 5); localvote: rounds of nothing " \
           "(a test) (default: 7)" in help_text
    # under a heading of its own, not FedCT's as if it were FedCT's alone
    shared = help_text.index("flags of several algorithms: --rounds ROUNDS fedct:")
    assert help_text.index("local vote:") < shared
    from skfedkt._registry import OptionError

    with pytest.raises(OptionError, match="argument --rounds: must be > 0, got 0"):
        algorithm_options(parser.parse_args(["run", "--rounds", "0"]))


def test_a_deployment_command_refuses_another_algorithms_flag(two_rounds_flags, tmp_path,
                                                              capsys):
    from skfedkt._cli._main import main

    command = ["party", "fedkt", "--data", str(tmp_path / "p.csv"), "--classes", "0", "1",
               "--name", "a", "--out", str(tmp_path / "u")]
    assert main([*command, "--selection", "cv"]) == 2
    assert ("skfedkt party: error: --selection is a flag of oneshot, not of fedkt"
            in capsys.readouterr().err)
    assert main([*command, "--vote-depth", "2"]) == 2
    assert "--vote-depth is a flag of localvote, not of fedkt" in capsys.readouterr().err
    # a flag two algorithms declare is each one's
    from skfedkt._cli._flags import algorithm_options
    from skfedkt._cli._main import build_parser

    args = build_parser().parse_args(["party", "fedct", *command[2:], "--rounds", "2"])
    assert algorithm_options(args)["fedct"]["n_rounds"] == 2
