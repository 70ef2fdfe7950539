"""The twelve nets of ``benchmarks/_net_corpus.py``, as people write them: each trains
on the stacked path as its separate fit would, and through every algorithm with its
module defined in the user's script (``__main__``) and ``n_jobs=2``."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_digits

torch = pytest.importorskip("torch")
skorch = pytest.importorskip("skorch")

from skfedkt._engine._stacking import _tier  # noqa: E402  (it imports torch)
from skfedkt._engine._fitting import Task, TierJob, fit_clones, recording_tiers  # noqa: E402
from skfedkt._engine._seeds import seeded_clone  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from _net_corpus import CORPUS  # noqa: E402

# how far a stacked net's weights may be from its separate fit's: float64 builds; the
# binary net trains on float targets, which torch reduces in float32 for a float64
# module, so it is checked in float32
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}
# the history's entries that a separate fit and the stack must agree on
RECORDED = ("train_loss", "valid_loss", "valid_acc", "event_lr", "train_batch_count",
            "train_loss_best", "valid_loss_best", "valid_acc_best")


def _digits(kind):
    X, y = load_digits(return_X_y=True)
    return X / 16, (y % 2 if kind == "binary" else y)


def _built(net, n_classes, dtype, epochs):
    estimator = net.build(64, n_classes, dtype)
    name = estimator.steps[-1][0]
    return estimator.set_params(**{f"{name}__verbose": 0, f"{name}__max_epochs": epochs})


def _last(estimator):
    return estimator.steps[-1][1]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("net", CORPUS, ids=[net.name for net in CORPUS])
def test_a_net_as_people_write_it_trains_stacked_as_its_separate_fit(net, monkeypatch):
    # the CPU trains convolutions one by one (faster there): stacked here for the check
    monkeypatch.setattr(_tier, "CPU_UNHELPED_MODULES", ())
    X, y = _digits(net.kind)
    n_classes = len(np.unique(y))
    dtype = torch.float32 if net.kind == "binary" else torch.float64
    estimator = _built(net, n_classes, dtype, epochs=2 if net.kind == "cnn" else 6)
    sizes = (45, 70, 60) if net.kind == "cnn" else (60, 95, 45, 80)
    starts = np.cumsum((0,) + sizes)
    tasks = [Task(estimator, y[start:stop], np.arange(start, stop))
             for start, stop in zip(starts[:-1], starts[1:])]
    seeds = np.arange(len(tasks)) + 7
    with recording_tiers() as tiers:
        fits = fit_clones(tasks, TierJob(X, n_classes, X_predict=X[-60:]), seeds)
    assert [(t["path"], t["reason"]) for t in tiers] == [("stacked", None)]
    for task, seed, model, votes in zip(tasks, seeds, fits.models, fits.predictions):
        alone = seeded_clone(estimator, seed).fit(
            X[task.rows], task.y.astype(np.float32 if n_classes == 2 else np.int64))
        mine, theirs = _last(model.estimator), _last(alone)
        for stacked, separate in zip(mine.module_.state_dict().values(),
                                     theirs.module_.state_dict().values()):
            assert_allclose(stacked.double().numpy(), separate.double().numpy(), rtol=0,
                            atol=TOLERANCE[dtype])
        assert len(mine.history) == len(theirs.history)  # early stopping stops alike
        for key in RECORDED:
            if key in theirs.history[-1]:
                assert_allclose(np.asarray(mine.history[:, key], dtype=float),
                                np.asarray(theirs.history[:, key], dtype=float),
                                atol=1e-6)
        assert_array_equal(votes, alone.predict(X[-60:]))


# every net through every algorithm in a script whose modules live in __main__, as a
# notebook's do, at n_jobs=2 (worker processes for the nets that train one by one)
SCRIPT = """
import pickle, sys, warnings
import numpy as np
from sklearn.datasets import load_digits
from skfedkt import (FedAvgClassifier, FedCTClassifier, FedKTClassifier,
                     OneShotEnsembleClassifier, config_context)
exec(open(sys.argv[1]).read())  # the corpus, defined in this __main__
warnings.simplefilter("ignore")
X, y = load_digits(return_X_y=True)
X = X / 16
for net in CORPUS:
    binary = net.kind == "binary"
    keep = (y < 2) if binary else (y < 3)
    X_net, y_net = X[keep][:270], y[keep][:270]
    parties = np.arange(len(y_net)) % 3
    estimator = net.build(64, 2 if binary else 3, None)
    name = estimator.steps[-1][0]
    estimator.set_params(**{name + "__verbose": 0, name + "__max_epochs": 1})
    algorithms = [(FedKTClassifier(estimator, n_teachers=2, n_students=1), True),
                  (FedCTClassifier(estimator, n_rounds=2), True),
                  (OneShotEnsembleClassifier(estimator), True),
                  (FedAvgClassifier(estimator, n_rounds=2, local_epochs=1), True),
                  (FedKTClassifier(estimator, n_teachers=2, n_students=1), False)]
    for clf, stacked in algorithms:
        clf.set_params(n_jobs=2, random_state=0)
        try:
            with config_context(stack_networks=stacked):
                clf.fit(X_net, y_net, groups=parties, X_unlabeled=X[1500:1600])
        except TypeError as exc:  # FedAvg averages no scaler fitted per party
            print(net.name, type(clf).__name__, "refused:", str(exc)[:60])
            continue
        # pickle finds each module class by name: the very class defined here
        print(net.name, type(clf).__name__, clf.score(X_net, y_net) >= 0,
              len(pickle.dumps(clf)) > 0, ",".join(t["path"] for t in clf.tier_fits_[:3]))
"""


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_net_trains_through_every_algorithm_from_a_script_with_two_jobs(tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(BENCHMARKS / "_net_corpus.py")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 5 * len(CORPUS)
    refused = [line for line in lines if "refused" in line]
    # FedAvg averages the weights of a Pipeline's last step, which a scaler fitted on
    # each party's rows would feed differently: refused, naming the fix
    assert refused == ["StandardScaler, then the paper MLP FedAvgClassifier refused: "
                       "FedAvgClassifier averages the weights of a Pipeline's last s"]
    for line in lines:
        if "refused" not in line:
            assert " True True " in line, line
    assert any(line.endswith("per-clone,per-clone,per-clone") for line in lines)


def test_a_validation_split_a_teacher_cannot_make_is_refused_before_any_fit(monkeypatch):
    from skfedkt import FedKTClassifier

    X, y = _digits("mlp")
    fits = []
    monkeypatch.setattr(skorch.NeuralNetClassifier, "fit",
                        lambda self, *a, **k: fits.append(self))
    net = CORPUS[4]  # the paper's MLP with skorch's defaults: ValidSplit(5)
    clf = FedKTClassifier(_built(net, 10, torch.float32, 1), n_teachers=10, random_state=0)
    with pytest.raises(ValueError) as error:
        clf.fit(X[:300], y[:300], groups=np.arange(300) % 3, X_unlabeled=X[1500:])
    message = str(error.value)
    assert message.startswith("Tier 'teachers': the skorch net's train_split=ValidSplit(5) "
                              "cannot hold out validation rows for ")
    assert "Party 0, partition 1, teacher 1 has 10 rows, of classes" in message
    assert "Set the net's train_split=None" in message and "ValidSplit(" in message
    assert fits == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("net", [net for net in CORPUS if net.kind != "cnn"],
                         ids=[net.name for net in CORPUS if net.kind != "cnn"])
def test_a_replayed_cuda_graph_step_is_the_eager_step(net, monkeypatch):
    from skfedkt._engine._stacking import _graphs

    X, y = _digits(net.kind)
    n_classes = len(np.unique(y))
    dtype = torch.float32 if net.kind == "binary" else torch.float64
    estimator = _built(net, n_classes, dtype, epochs=4)
    estimator.set_params(**{f"{estimator.steps[-1][0]}__device": "cuda"})
    # tasks of one size: every copy takes full steps together, which the graph replays
    tasks = [Task(estimator, y[start : start + 160], np.arange(start, start + 160))
             for start in range(0, 640, 160)]
    replays = []
    replay = _graphs.StepGraph.__call__
    monkeypatch.setattr(_graphs.StepGraph, "__call__",
                        lambda self, *inputs: replays.append(1) or replay(self, *inputs))
    states = {}
    for captured in (True, False):
        monkeypatch.setattr(_graphs, "CAPTURE_STEPS", captured)
        fits = fit_clones(tasks, TierJob(X, n_classes), np.arange(4))
        states[captured] = [_last(model.estimator).module_.state_dict()
                            for model in fits.models]
    # dropout draws from each copy's generator on the host's order: never captured
    drops = any(isinstance(part, torch.nn.modules.dropout._DropoutNd)
                for part in _last(estimator).initialize().module_.modules())
    assert bool(replays) != drops
    for replayed, eager in zip(states[True], states[False]):
        for name in eager:
            assert_allclose(replayed[name].double().cpu().numpy(),
                            eager[name].double().cpu().numpy(), rtol=0,
                            atol=TOLERANCE[dtype])
