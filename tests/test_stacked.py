"""A tier's torch networks trained together (the stacked path) against separate fits."""

import copy
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skfedkt import FedAvgClassifier, FedKTClassifier, config_context
from skfedkt._engine._fitting import Task, TierJob, fit_clones, recording_tiers
from skfedkt._engine._seeds import seeded_clone

torch = pytest.importorskip("torch")
skorch = pytest.importorskip("skorch")

from skfedkt._engine import _stacking  # noqa: E402  (it imports torch)
from skfedkt._engine._stacking import _tier  # noqa: E402

from _data import federated_digits  # noqa: E402
from _torch_modules import (  # noqa: E402
    MLP,
    Conv1dNet,
    LSTMClassifier,
    SmallCNN,
    ThreadRecorder,
    to_float32,
    to_images,
)

# float64 networks: a stacked fit and a separate one agree to this
FLOAT64_TOLERANCE = 1e-10
# float32 networks after 20 epochs: torch's kernels round differently for a stack
FLOAT32_TOLERANCE = 1e-4


def _net(module=MLP, dtype=torch.float64, **params):
    settings = dict(module__dtype=dtype, criterion=torch.nn.CrossEntropyLoss,
                    optimizer=torch.optim.Adam, lr=0.01, max_epochs=20, batch_size=16,
                    train_split=None, verbose=0)
    settings.update(params)
    return skorch.NeuralNetClassifier(module, **settings)


@pytest.fixture(scope="module")
def digits():
    X_train, y_train, _, X_public, _, _ = federated_digits(n_parties=5)
    return X_train / 16, y_train, X_public / 16


def _tasks(estimator, y, sizes=(23, 40, 7, 61, 16, 33)):
    """Tasks on consecutive rows of uneven sizes: the stack pads and masks them."""
    starts = np.cumsum((0,) + sizes)
    return [Task(estimator, y[start:stop], np.arange(start, stop))
            for start, stop in zip(starts[:-1], starts[1:])]


def _separate_fit(estimator, task, seed, X):
    return seeded_clone(estimator, seed).fit(X[task.rows], task.y.astype(np.int64))


def _last_step(estimator):
    return estimator[-1] if hasattr(estimator, "steps") else estimator


@pytest.mark.parametrize("kind", ["mlp", "cnn", "scaled mlp", "sgd", "adamw"])
def test_a_stacked_fit_gives_each_clone_its_separate_fit(digits, kind, monkeypatch):
    X, y, X_public = digits
    # convolutions stack on a GPU; on the CPU only when asked to, as here
    monkeypatch.setattr(_tier, "CPU_UNHELPED_MODULES", ())
    estimator = {
        "mlp": _net(),
        "cnn": make_pipeline(FunctionTransformer(to_images), _net(SmallCNN)),
        # a step that learns from each clone's own rows
        "scaled mlp": make_pipeline(StandardScaler(), _net()),
        "sgd": _net(optimizer=torch.optim.SGD, optimizer__momentum=0.9,
                    optimizer__nesterov=True, optimizer__weight_decay=1e-3),
        "adamw": _net(optimizer=torch.optim.AdamW, optimizer__amsgrad=True,
                      criterion__label_smoothing=0.1),
    }[kind]
    tasks, seeds = _tasks(estimator, y), np.arange(6) + 10
    with recording_tiers() as tiers:
        fits = fit_clones(tasks, TierJob(X, 10, X_predict=X_public, soft_votes=True), seeds)
    assert [t["path"] for t in tiers] == ["stacked"]
    for task, seed, model, votes in zip(tasks, seeds, fits.models, fits.predictions):
        alone = _separate_fit(estimator, task, seed, X)
        stacked_net, alone_net = _last_step(model.estimator), _last_step(alone)
        for mine, theirs in zip(stacked_net.module_.state_dict().values(),
                                alone_net.module_.state_dict().values()):
            assert_allclose(mine.numpy(), theirs.numpy(), rtol=0, atol=FLOAT64_TOLERANCE)
        # an ordinary fitted net: its optimizer state, history and classes as fit's
        theirs_state = alone_net.optimizer_.state_dict()["state"]
        for index, state in stacked_net.optimizer_.state_dict()["state"].items():
            for key, value in state.items():
                if value is not None:
                    assert_allclose(np.asarray(value), np.asarray(theirs_state[index][key]),
                                    atol=FLOAT64_TOLERANCE)
        assert_allclose(stacked_net.history[:, "train_loss"],
                        alone_net.history[:, "train_loss"], atol=FLOAT64_TOLERANCE)
        assert stacked_net.history[:, "train_batch_count"] == alone_net.history[
            :, "train_batch_count"]
        assert_array_equal(stacked_net.classes_, alone_net.classes_)
        assert_allclose(votes, alone.predict_proba(X_public).astype(np.float32), atol=1e-6)


def test_float32_nets_agree_within_the_stated_tolerance(digits):
    X, y, X_public = digits
    estimator = make_pipeline(FunctionTransformer(to_float32), _net(dtype=torch.float32))
    tasks, seeds = _tasks(estimator, y), np.arange(6)
    fits = fit_clones(tasks, TierJob(X, 10), seeds)
    for task, seed, model in zip(tasks, seeds, fits.models):
        alone = _separate_fit(estimator, task, seed, X)
        for mine, theirs in zip(model.estimator[-1].module_.parameters(),
                                alone[-1].module_.parameters()):
            assert_allclose(mine.detach().numpy(), theirs.detach().numpy(),
                            atol=FLOAT32_TOLERANCE)


def test_stacked_results_do_not_depend_on_n_jobs_or_chunks(digits, monkeypatch):
    X, y, X_public = digits
    estimator = _net(max_epochs=5)
    tasks, seeds = _tasks(estimator, y), np.arange(6)

    def votes(**options):
        with recording_tiers() as tiers:
            fits = fit_clones(tasks, TierJob(X, 10, X_predict=X_public, soft_votes=True), seeds,
                              **options)
        return fits.predictions, tiers[0]

    one, tier = votes()
    two, _ = votes(n_jobs=2)
    assert_array_equal(one, two)
    # a tier larger than one chunk streams in chunks, with the same training
    monkeypatch.setattr(_tier, "CPU_CHUNK_BYTES", 1)
    chunked, chunked_tier = votes(n_jobs=2)
    assert chunked_tier["chunks"] == len(tasks)
    assert_allclose(chunked, one, atol=1e-6)


def _first_chunk_cannot_stack(monkeypatch, name):
    """`_stacking.name` refusing its first chunk as a chunk the probe did not foresee
    would (`CannotStack`), and training the others."""
    calls, original = [], getattr(_stacking, name)

    def refusing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise _stacking.CannotStack("this chunk's validation split is not the probe's")
        return original(*args, **kwargs)

    monkeypatch.setattr(_stacking, name, refusing)


def test_a_chunk_that_cannot_stack_after_the_probe_trains_one_by_one(digits, monkeypatch):
    X, y, X_public = digits
    estimator = _net(max_epochs=3)
    tasks, seeds = _tasks(estimator, y), np.arange(6)
    monkeypatch.setattr(_tier, "CPU_CHUNK_BYTES", 1)  # a chunk a net

    def fitted():
        with recording_tiers() as tiers:
            fits = fit_clones(tasks, TierJob(X, 10, X_predict=X_public, soft_votes=True), seeds)
        return fits.predictions, tiers[0]

    stacked, _ = fitted()
    _first_chunk_cannot_stack(monkeypatch, "fit_chunk")
    mixed, tier = fitted()
    assert tier["path"] == "stacked" and tier["chunks"] == len(tasks)
    assert tier["reason"] == ("1 of 6 chunk(s) trained one by one: this chunk's validation "
                              "split is not the probe's")
    # the first net as its own fit trains it, the others stacked as before
    alone = _separate_fit(estimator, tasks[0], seeds[0], X)
    assert_allclose(mixed[0], alone.predict_proba(X_public), atol=FLOAT64_TOLERANCE)
    assert_allclose(mixed[1:], stacked[1:], atol=FLOAT64_TOLERANCE)


def test_fedavg_parties_that_cannot_stack_after_the_probe_train_one_by_one(digits,
                                                                          monkeypatch):
    X, y, _ = digits
    party = np.arange(len(y)) % 4
    net = _net(max_epochs=1)
    monkeypatch.setattr(_tier, "CPU_CHUNK_BYTES", 1)
    together = FedAvgClassifier(net, n_rounds=2, local_epochs=1, random_state=0).fit(
        X, y, groups=party)
    _first_chunk_cannot_stack(monkeypatch, "train_from_weights")
    mixed = clone(together).fit(X, y, groups=party)
    assert [t["path"] for t in mixed.tier_fits_] == ["stacked"] * len(mixed.tier_fits_)
    assert mixed.tier_fits_[0]["reason"].startswith("1 of 4 chunk(s) trained one by one")
    for mine, theirs in zip(mixed.estimator_.module_.parameters(),
                            together.estimator_.module_.parameters()):
        assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), atol=1e-8)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("change, reason", [
    (dict(optimizer=torch.optim.RMSprop), "optimizer RMSprop"),
    (dict(callbacks=[skorch.callbacks.GradientNormClipping(1.0)]),
     "callback GradientNormClipping (GradientNormClipping): it acts on each net's own"),
    (dict(callbacks=[skorch.callbacks.EpochScoring("accuracy", on_train=True)]),
     "an EpochScoring on the training rows"),
    (dict(callbacks=[skorch.callbacks.LRScheduler("CyclicLR", base_lr=0.01, max_lr=0.1)]),
     "learning-rate schedules once an epoch"),
    (dict(iterator_train__pin_memory=True), "iterator_train: the stacked path draws"),
    (dict(criterion=torch.nn.MultiMarginLoss), "criterion MultiMarginLoss"),
    (dict(module=LSTMClassifier), "loops over sequences"),
    (dict(module=Conv1dNet), "Conv1d: on the CPU, stacked convolutions of this kind"),
])
def test_what_the_stacked_path_cannot_serve_trains_one_by_one_and_says_why(
        digits, change, reason, capsys):
    X, y, X_public = digits
    module = change.pop("module", MLP)
    estimator = _net(module, dtype=torch.float32, max_epochs=2, **change)
    to_rows = FunctionTransformer(to_float32)
    # hard votes: a criterion other than a likelihood's gives no probabilities to pool
    clf = FedKTClassifier(make_pipeline(to_rows, estimator), voting="hard",
                          n_students=1, n_teachers=2, verbose=1, random_state=0)
    party = np.arange(len(y)) % 2
    clf.fit(X[:200], y[:200], groups=party[:200], X_unlabeled=X_public[:50])
    teachers = clf.tier_fits_[0]
    assert (teachers["tier"], teachers["path"], teachers["device"]) == (
        "teachers", "per-clone", "cpu")
    assert reason in teachers["reason"]
    assert f"teachers: 4 nets trained one by one ({teachers['reason']}" in (
        capsys.readouterr().out)


def test_the_stacked_path_can_be_turned_off_and_is_said(digits, capsys):
    X, y, X_public = digits
    net = make_pipeline(FunctionTransformer(to_float32), _net(dtype=torch.float32,
                                                               max_epochs=2))
    party = np.arange(len(y)) % 3
    clf = FedKTClassifier(net, n_students=2, n_teachers=2, verbose=1, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    said = capsys.readouterr().out
    assert [(t["tier"], t["path"], t["clones"]) for t in clf.tier_fits_] == [
        ("teachers", "stacked", 12), ("students", "stacked", 6),
        # one net alone gains from the stack's loop too, on the CPU
        ("final model", "stacked", 1)]
    chunks = clf.tier_fits_[0]["chunks"]
    assert f"teachers: 12 nets trained together in {chunks} chunk(s) on cpu" in said
    with config_context(stack_networks=False):
        off = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    assert {(t["path"], t["reason"]) for t in off.tier_fits_} == {
        ("per-clone", "skfedkt's configuration: stack_networks=False")}
    # a setting of how the steps run, not of what the parties agree on: no parameter
    assert "stack_networks" not in clf.get_params()
    upload = off.fit_party(X[party == 0], y[party == 0], party=0, classes=clf.classes_,
                           X_unlabeled=X_public)
    assert "stack_networks" not in upload.manifest["params"]


def test_non_network_tiers_are_recorded_without_a_device(digits):
    from sklearn.tree import DecisionTreeClassifier

    X, y, X_public = digits
    clf = FedKTClassifier(DecisionTreeClassifier(), random_state=0).fit(
        X, y, groups=np.arange(len(y)) % 2, X_unlabeled=X_public)
    assert [(t["path"], t["device"]) for t in clf.tier_fits_] == [("per-clone", None)] * 3
    assert "not a torch network" in clf.tier_fits_[0]["reason"]


def test_a_clone_of_one_class_in_a_stacked_tier_is_a_constant_model(digits):
    X, y, _ = digits
    estimator = _net(max_epochs=2)
    tasks = _tasks(estimator, y)
    rows = np.flatnonzero(y == 3)[:5]
    tasks[2] = Task(estimator, y[rows], rows)
    fits = fit_clones(tasks, TierJob(X, 10), np.arange(6))
    assert type(fits.models[2].estimator).__name__ == "DummyClassifier"
    assert_array_equal(fits.models[2].predict(X[:4]), [3, 3, 3, 3])
    assert all(isinstance(m.estimator, skorch.NeuralNetClassifier)
               for i, m in enumerate(fits.models) if i != 2)


@pytest.mark.parametrize("proximal_mu", [0.0, 0.1])
def test_fedavg_rounds_train_every_party_together_as_their_separate_fits(digits,
                                                                       proximal_mu):
    X, y, _ = digits
    party = np.arange(len(y)) % 4
    net = make_pipeline(FunctionTransformer(to_float32), _net(dtype=torch.float32,
                                                               max_epochs=1))
    stacked = FedAvgClassifier(net, n_rounds=3, local_epochs=2, proximal_mu=proximal_mu,
                               random_state=0).fit(X, y, groups=party)
    with config_context(stack_networks=False):
        alone = clone(stacked).fit(X, y, groups=party)
    assert {t["path"] for t in stacked.tier_fits_} == {"stacked"}
    assert {t["path"] for t in alone.tier_fits_} == {"per-clone"}
    for mine, theirs in zip(stacked.estimator_[-1].module_.parameters(),
                            alone.estimator_[-1].module_.parameters()):
        assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("proximal_mu", [0.0, 0.5])
def test_fedavg_rounds_replayed_as_cuda_graphs_are_the_eager_rounds(digits, proximal_mu,
                                                                     monkeypatch):
    from skfedkt._engine._stacking import _graphs

    X, y, _ = digits
    X, y = X[:1280], y[:1280]
    party = np.arange(len(y)) % 4  # parties of one size: every step is full
    net = _net(max_epochs=1, device="cuda")
    models = {}
    for captured in (True, False):
        monkeypatch.setattr(_graphs, "CAPTURE_STEPS", captured)
        models[captured] = FedAvgClassifier(net, n_rounds=3, local_epochs=2,
                                            proximal_mu=proximal_mu,
                                            random_state=0).fit(X, y, groups=party)
    for mine, theirs in zip(models[True].estimator_.module_.parameters(),
                            models[False].estimator_.module_.parameters()):
        assert_allclose(mine.detach().cpu().numpy(), theirs.detach().cpu().numpy(),
                        rtol=0, atol=FLOAT64_TOLERANCE)


def test_the_probe_refuses_a_module_vmap_cannot_batch(digits):
    X, y, _ = digits

    class Looping(torch.nn.Module):  # noqa: D401 - data-dependent control flow
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(64, 10, dtype=torch.float64)

        def forward(self, X):
            return self.linear(X) * (2 if X.sum() > 0 else 1)

    template = copy.deepcopy(_net(Looping, max_epochs=1))
    del template.module__dtype
    from skfedkt._engine._seeds import SeededTemplate

    probe = _stacking.probe(SeededTemplate(template), 0, X[:20], y[:20].astype(np.int64), 10,
                           20)
    assert "torch.func cannot stack the module" in probe.refusal


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_every_clone_fit_runs_one_thread_and_the_caller_keeps_its_own(digits, tmp_path,
                                                                      monkeypatch, n_jobs):
    X, y, X_public = digits
    party = np.arange(len(y)) % 2
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # one by one (a callback), in this process or in workers
        net = _net(dtype=torch.float32, max_epochs=1,
                   callbacks=[("threads", ThreadRecorder(tmp_path))])
        FedKTClassifier(make_pipeline(FunctionTransformer(to_float32), net), n_students=1,
                        n_teachers=2, n_jobs=n_jobs, random_state=0).fit(
            X, y, groups=party, X_unlabeled=X_public)
        assert {path.read_text() for path in tmp_path.iterdir()} == {"1 1"}
        # stacked, in this process
        seen = []
        train = _stacking.NetworkStack.train
        monkeypatch.setattr(_stacking.NetworkStack, "train", lambda self, *args, **kwargs: (
            seen.append(torch.get_num_threads()), train(self, *args, **kwargs))[1])
        FedKTClassifier(make_pipeline(FunctionTransformer(to_float32), _net(
            dtype=torch.float32, max_epochs=1)), n_students=1, n_teachers=2,
            random_state=0).fit(X, y, groups=party, X_unlabeled=X_public)
        assert set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_sgd_without_momentum_decays_only_the_nets_that_step(digits):
    # uneven nets: the smaller one's epoch is over while the larger takes steps, and
    # weight decay must not shrink it meanwhile
    X, y, _ = digits
    estimator = _net(optimizer=torch.optim.SGD, lr=0.1, optimizer__weight_decay=0.5,
                     max_epochs=3, batch_size=8)
    tasks = [Task(estimator, y[:40], np.arange(40)), Task(estimator, y[40:48],
                                                           np.arange(40, 48))]
    fits = fit_clones(tasks, TierJob(X, 10), [1, 2])
    for task, seed, model in zip(tasks, [1, 2], fits.models):
        alone = _separate_fit(estimator, task, seed, X)
        for mine, theirs in zip(model.estimator.module_.parameters(),
                                alone.module_.parameters()):
            assert np.isfinite(theirs.detach().numpy()).all()
            assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), rtol=0,
                            atol=FLOAT64_TOLERANCE)


def test_fedavg_with_plain_sgd_and_weight_decay_stacks_as_it_trains_alone(digits):
    X, y, _ = digits
    rows = np.r_[0:80, 80:96]
    party = np.r_[np.zeros(80), np.ones(16)]
    net = _net(module=MLP, optimizer=torch.optim.SGD, lr=0.1, optimizer__weight_decay=0.5)
    stacked = FedAvgClassifier(net, n_rounds=1, local_epochs=3, random_state=0).fit(
        X[rows], y[rows], groups=party)
    with config_context(stack_networks=False):
        alone = clone(stacked).fit(X[rows], y[rows], groups=party)
    for mine, theirs in zip(stacked.estimator_.module_.parameters(),
                            alone.estimator_.module_.parameters()):
        assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), atol=1e-10)


def test_an_error_of_the_net_itself_is_raised_not_taken_for_a_refusal(digits):
    from skfedkt._engine._seeds import SeededTemplate

    X, y, _ = digits

    class Wrong(torch.nn.Module):  # noqa: D401 - a module that cannot take these rows
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(63, 10, dtype=torch.float64)

        def forward(self, X):
            return self.linear(X)

    template = _net(Wrong, max_epochs=1)
    del template.module__dtype
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        _stacking.probe(SeededTemplate(template), 0, X[:20], y[:20].astype(np.int64), 10,
                        20)


def test_an_older_torch_trains_one_by_one_and_says_why(monkeypatch):
    from skfedkt._engine._stacking import _refusals

    monkeypatch.setattr(torch, "__version__", "2.7.0+cpu")
    reason = _refusals.stacking_refusal(_net())
    assert reason == "torch 2.7.0+cpu: the stacked path is tested from torch 2.11 on"


def test_each_epoch_records_its_own_duration(digits):
    X, y, _ = digits
    estimator = _net(max_epochs=4)
    tasks, seeds = _tasks(estimator, y), np.arange(6)
    fits = fit_clones(tasks, TierJob(X, 10), seeds)
    durations = np.array([model.estimator.history[:, "dur"] for model in fits.models])
    # the epoch timer's own measure: every net's epochs take the stack's epochs' time,
    # not one share of the chunk's time repeated
    assert (durations > 0).all()
    assert len(set(durations[0].tolist())) > 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layer", [torch.nn.Dropout(0.1), torch.nn.Dropout(0.5),
                                   torch.nn.Dropout2d(0.8)])
def test_dropout_draws_are_torch_bernoulli_bits_and_generator_states(layer, dtype):
    from skfedkt._engine._stacking._forward import Draws

    ours = [torch.Generator().manual_seed(seed) for seed in (1, 2, 3)]
    theirs = [torch.Generator().manual_seed(seed) for seed in (1, 2, 3)]
    rows = [5, 0, 3]
    x = torch.ones((3, 6, 4, 2, 2) if isinstance(layer, torch.nn.Dropout2d) else (3, 6, 7),
                   dtype=dtype)
    for _ in range(2):  # a second step draws on from where the first left off
        noise = Draws(ours, rows).noise(layer, x)
        assert noise.dtype == dtype
        for index, (generator, n) in enumerate(zip(theirs, rows)):
            expected = torch.zeros_like(noise[index])
            if n:
                expected[:n] = torch.empty_like(noise[index, :n]).bernoulli_(
                    1 - layer.p, generator=generator)
            assert torch.equal(noise[index], expected)
    for mine, reference in zip(ours, theirs):
        assert torch.equal(mine.get_state(), reference.get_state())


def test_a_learning_rate_schedule_warns_no_more_stacked_than_alone(digits):
    X, y, _ = digits
    schedule = skorch.callbacks.LRScheduler(policy="StepLR", step_size=2, gamma=0.5)
    estimator = _net(max_epochs=4, optimizer=torch.optim.SGD, callbacks=[schedule])
    tasks = _tasks(estimator, y, sizes=(30, 40))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fits = fit_clones(tasks, TierJob(X, 10), np.arange(2))
    # torch warns where a schedule steps before the optimizer: each net's did step
    assert not [w for w in caught if "lr_scheduler" in str(w.message)]
    rates = [model.estimator.optimizer_.param_groups[0]["lr"] for model in fits.models]
    assert rates == [0.01 * 0.5 ** 2] * 2


def test_seeding_a_clone_sets_what_torch_manual_seed_sets_on_this_machine(monkeypatch):
    from skfedkt._engine._seeds import seed_torch

    torch.manual_seed(11)
    expected = torch.get_rng_state()
    torch.manual_seed(0)
    if not torch.cuda.is_available():  # nothing queued for an accelerator it lacks
        monkeypatch.setattr(torch, "manual_seed", None)
    seed_torch(torch, 11)
    assert torch.equal(torch.get_rng_state(), expected)


class _LogSoftmaxMLP(MLP):
    """An MLP whose output normalises along the rows' axis given positionally."""

    def forward(self, X):
        return torch.log_softmax(torch.tanh(self.layers(X)), 1)


def test_a_normalising_function_runs_on_the_stack_as_on_each_net(digits):
    X, y, _ = digits
    estimator = _net(_LogSoftmaxMLP, max_epochs=3)
    tasks, seeds = _tasks(estimator, y, sizes=(30, 45)), np.arange(2)
    with recording_tiers() as tiers:
        fits = fit_clones(tasks, TierJob(X, 10), seeds)
    assert tiers[0]["path"] == "stacked"
    for task, seed, model in zip(tasks, seeds, fits.models):
        alone = _separate_fit(estimator, task, seed, X)
        for mine, theirs in zip(model.estimator.module_.parameters(),
                                alone.module_.parameters()):
            assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), rtol=0,
                            atol=FLOAT64_TOLERANCE)


def test_a_step_of_little_arithmetic_trains_its_tier_in_one_chunk(digits, monkeypatch):
    X, y, _ = digits
    estimator = _net(max_epochs=1)  # 64 x 32 x 10 weights: far below the threshold
    tasks, seeds = _tasks(estimator, y), np.arange(6)

    def tier(n_jobs):
        with recording_tiers() as tiers:
            fit_clones(tasks, TierJob(X, 10), seeds, n_jobs=n_jobs)
        return tiers[0]["chunks"]

    assert tier(n_jobs=1) == tier(n_jobs=2) == 1
    # a step of more arithmetic: a core's share of the tier a chunk, for any n_jobs
    monkeypatch.setattr(_tier, "CPU_THREADED_STEP_FLOPS", 0)
    per_core = -(-len(tasks) // joblib.cpu_count())
    assert tier(n_jobs=1) == tier(n_jobs=2) == -(-len(tasks) // per_core)
