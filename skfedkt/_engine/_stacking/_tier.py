"""The probe that decides whether and how a tier's nets stack, and the chunks the
engine fits: clones started as their own fits would start, trained together, their
votes and weights read back."""

import threading
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import torch
from joblib import cpu_count

from .._class_codes import ClassCodeModel, code_dtype
from .._compat import set_inferred_classes
from .._nets import (
    explained_module_error,
    is_binary_net,
    learner_and_steps,
    stateful_steps,
    targets_for,
)
from .._rows import take_rows
from ._copies import CopyRun
from ._forward import (
    CONVOLUTIONS,
    DROPOUTS,
    CannotStack,
    StackedForward,
    untraceable_refusal,
)
from ._refusals import acts_between_epochs, module_refusal
from ._stack import NetworkStack

# what one chunk of copies may hold on the CPU (weights, gradients, optimizer state,
# rows and activations, as `_bytes_per_copy` estimates them), and at most how many
# copies: on the CPU a step's time grows with the copies, so small chunks cost little
# and keep copies of like sizes together; on a GPU, half its free memory
CPU_CHUNK_BYTES = 256 * 2**20
MAX_COPIES = {"cpu": 64, "cuda": 1024}
# a copy whose training step does less arithmetic than this (floating-point
# operations, `step_flops`) spends the step in Python and in launching kernels, which
# threads of one process take turns at under Python's lock: on 2 cores, two threads
# of 5 copies trained the paper's MLP on digits' 64 features (3.4 million a step)
# slower than one chunk of 10 in one thread (2.2 ms a step against 1.5), and on 784
# features (17 million a step) faster (2.7 against 3.3)
CPU_THREADED_STEP_FLOPS = 8e6
# what the votes of one chunk may hold at once (activations of a block of rows)
VOTE_BLOCK_BYTES = 64 * 2**20

# modules the CPU trains no faster stacked than one by one: convolutions (through vmap
# skorch's tutorial CNN trains slower stacked, the paper's small CNN a little faster;
# as unfolded patches both far slower: benchmarks/results/stacked_convolutions.json)
CPU_UNHELPED_MODULES = CONVOLUTIONS
# how a stack of 2-D convolutions runs on each kind of device: through vmap, a grouped
# convolution (False), or as unfolded patches times kernels (True), which measured
# slower on both (the same table)
UNFOLD_CONVOLUTIONS = {"cpu": False, "cuda": False}


class Probe(NamedTuple):
    """What one clone of a tier tells before the tier is stacked."""

    refusal: Optional[str]
    """Why the tier cannot be stacked, or None."""
    copies_per_chunk: int
    """How many copies one chunk holds."""
    device: str
    """Where the copies train."""
    row_bytes: int = 0
    """What one row holds in one copy's forward pass (its activations)."""
    graphs: Optional[dict] = None
    """The module's traces, which every chunk of the tier runs (`StackedForward`)."""
    step_flops: float = 0.0
    """The arithmetic of one copy's training step: six per weight and row."""

    @property
    def threaded(self):
        """Whether the tier's chunks train in threads, one per core: on the CPU, where
        a step's arithmetic outweighs its Python (`CPU_THREADED_STEP_FLOPS`)."""
        return (torch.device(self.device).type == "cpu"
                and self.step_flops >= CPU_THREADED_STEP_FLOPS)

    def chunk_size(self, n_copies):
        """Copies per chunk for a tier of `n_copies`: where the chunks train in
        threads, at most a core's share of them, so that every core gets a chunk
        (the same for any ``n_jobs``); else as many as a chunk holds."""
        if not self.threaded:
            return self.copies_per_chunk
        return max(1, min(self.copies_per_chunk, -(-n_copies // cpu_count())))

    def block_rows(self, n_copies):
        """Rows that `n_copies` copies vote on at once within `VOTE_BLOCK_BYTES`."""
        return int(max(1, VOTE_BLOCK_BYTES // max(1, n_copies * self.row_bytes)))


class Started(NamedTuple):
    """A clone ready to train: its estimator, its net (initialised), the rows its net
    learns from, and its generators (see `CopyRun`)."""

    estimator: Any
    net: Any  # a skorch net (skorch has no type hints)
    rows: np.ndarray
    generator: Optional[torch.Generator]
    noise_generator: Optional[torch.Generator]


def _draws(net):
    """Whether `net`'s training draws from torch's generator beyond its data loaders'
    base seeds: shuffled minibatches or dropout noise."""
    shuffled = bool(net.get_params_for("iterator_train").get("shuffle", False))
    return shuffled or any(
        isinstance(part, DROPOUTS) and 0 < part.p
        for part in net.module_.modules())


def _generators(net, seed):
    """The generators of a net just initialised under `seed`: one in the state torch's
    global generator is in now (what its ``fit`` draws next), and where its dropout
    noise comes from (on a GPU a generator of its own, seeded alike)."""
    if not _draws(net):
        return None, None
    generator = torch.Generator()
    generator.set_state(torch.get_rng_state())
    device = torch.device(net.device or "cpu")
    if device.type == "cpu":
        return generator, generator
    noise = torch.Generator(device=device)
    noise.manual_seed(int(seed))
    return generator, noise


# torch's global generator, which seeding a clone and initialising its net use: the
# threads that train a tier's chunks take turns
_GLOBAL_GENERATOR = threading.Lock()


def started_clone(template, seed, X, y):
    """A clone of the template seeded with `seed` (`SeededTemplate`), `X` through its
    steps before the net (fitted on `X`, `y`), its net initialised, as its ``fit``
    would do them in that order."""
    with _GLOBAL_GENERATOR:
        estimator = template.clone(seed)
        net, steps = learner_and_steps(estimator)
        rows = X if steps is None else steps.fit_transform(X, y)
        net.initialize()
        return Started(estimator, net, rows, *_generators(net, seed))


def _is_vmap_refusal(exc):
    """Whether `exc` is torch.func's refusal to batch an operation (data-dependent
    control flow, a random draw inside vmap, an operation without a batching rule)."""
    first_line = str(exc).split("\n", 1)[0].lower()
    return isinstance(exc, RuntimeError) and ("vmap" in first_line
                                              or "batching rule" in first_line)


def _unfold_convolutions(device):
    return UNFOLD_CONVOLUTIONS.get(torch.device(device).type, False)


def probe(template, seed, X, y, n_classes, max_rows):
    """Whether and how the nets of `template` stack, found on one clone (seeded with
    `seed`, on rows `X`, `y` of a task) and two copies of it trained together: its
    settings (`module_refusal`), rows that are not one array, an output other than
    the net's (one column per class, or one for a binary net), what the stack cannot
    run as each net's own step (`CannotStack`) or ``torch.func.vmap`` cannot batch
    refuse it. Any other error is the net's own and is raised, as its fit would.
    `max_rows`: the most rows a copy learns."""
    started = started_clone(template, seed, X, y)
    net, rows = started.net, started.rows
    device = str(net.device or "cpu")

    def refused(reason):
        return Probe(reason, 0, device)

    reason = module_refusal(net)
    if reason is not None:
        return refused(reason)
    unhelped = [type(part).__name__ for part in net.module_.modules()
                if isinstance(part, CPU_UNHELPED_MODULES)]
    if unhelped and torch.device(device).type == "cpu":
        return refused(f"{unhelped[0]}: on the CPU, stacked convolutions of this kind "
                       "train no faster than one by one")
    if not isinstance(rows, np.ndarray) or rows.dtype == object:
        return refused(f"the net's rows are {type(rows).__name__}, not one numeric array")
    sample = torch.as_tensor(rows[:2], device=device)
    activations = []
    hooks = [part.register_forward_hook(lambda m, i, out: activations.append(
                 _activation_elements(m, out)))
             for part in net.module_.modules() if not list(part.children())]
    try:
        with torch.no_grad():
            output = net.module_.eval()(sample)
    except RuntimeError as exc:
        raise explained_module_error(net, exc) from exc
    finally:
        for hook in hooks:
            hook.remove()
    binary = is_binary_net(net)
    expected = [(len(sample),), (len(sample), 1)] if binary else [(len(sample), n_classes)]
    if not torch.is_tensor(output) or tuple(output.shape) not in expected:
        return refused("the module's output is not " + (
            "one logit per row" if binary else f"one column per class ({n_classes})"))
    forward = StackedForward(net.module_, _unfold_convolutions(device))
    if not forward.traced and (reason := untraceable_refusal(net.module_)):
        return refused(reason)
    try:
        _trial(template, seed, started, X, y, forward.graphs)
    except CannotStack as exc:
        return refused(str(exc))
    except RuntimeError as exc:
        if not _is_vmap_refusal(exc):
            raise
        return refused(f"torch.func cannot stack the module ({exc})".split("\n")[0])
    batch = net.get_params_for("iterator_train").get("batch_size", net.batch_size)
    batch = max_rows if batch == -1 else min(batch, max_rows)
    row_activations = sum(activations) / len(sample)
    per_copy = _bytes_per_copy(net, max_rows * rows[0].size, row_activations * batch,
                               max_rows)
    kind = torch.device(device).type
    budget = (torch.cuda.mem_get_info(torch.device(device))[0] // 2 if kind == "cuda"
              else CPU_CHUNK_BYTES)
    itemsize = next(net.module_.parameters()).element_size()
    weights = sum(p.numel() for p in net.module_.parameters() if p.requires_grad)
    return Probe(None, int(max(1, min(MAX_COPIES.get(kind, 64), budget // per_copy))),
                 device, int(row_activations * itemsize), forward.graphs,
                 6.0 * weights * batch)


def _trial(template, seed, started, X, y, graphs):
    """The probe's clone and another trained together, as the tier will, for two
    steps of an epoch."""
    twin = started_clone(template, seed + 1, X, y)
    targets = targets_for(started.net, y)
    runs = [CopyRun(one.net, one.rows, targets, one.generator, one.noise_generator,
                    events=False) for one in (started, twin)]
    stack = NetworkStack([started.net, twin.net],
                         _unfold_convolutions(str(started.net.device or "cpu")), graphs)
    # two steps run every part of a step (the first makes the optimizer, the second
    # updates its state); an epoch of a student's thousands of rows shows no more
    stack.step_limit = 2
    stack.train(runs, [1])


def _activation_elements(module, output):
    """Elements a layer's forward pass holds: its output, and for a convolution the
    unfolded input it multiplies (input channels x kernel area per output position)."""
    elements = output.numel() if torch.is_tensor(output) else 0
    if isinstance(module, CONVOLUTIONS):
        per_position = module.in_channels // module.groups * int(np.prod(module.kernel_size))
        elements += output.numel() // module.out_channels * per_position
    return elements


def _bytes_per_copy(net, row_elements, activation_elements, n_rows):
    """What one copy holds while it trains: weights, gradient (and its contiguous
    copy), optimizer state, its rows and labels, and a step's activations (kept for
    the backward pass, and their gradients)."""
    weights = sum(p.numel() for p in net.module_.parameters())
    options = net.optimizer_.param_groups[0]
    slots = (2 + bool(options.get("amsgrad")) if "betas" in options
             else bool(options.get("momentum")))
    itemsize = next(net.module_.parameters()).element_size()
    return (itemsize * (weights * (3 + slots) + row_elements + 3 * activation_elements)
            + 8 * n_rows)


def _runs_of(started, targets, keep):
    """Each started clone's `CopyRun`: its events run where the net is kept, prints,
    or has callbacks that act between epochs."""
    return [CopyRun(one.net, one.rows, target, one.generator, one.noise_generator,
                    events=bool(kept or one.net.verbose or acts_between_epochs(one.net)))
            for one, target, kept in zip(started, targets, keep)]


def train_from_weights(start, estimator, items, epochs, proximal_mu, block_rows, graphs):
    """FedAvg's local training of every party together: for each item ``(X, y,
    n_classes, seed, weights)`` a clone started from the global weights by ``start(
    estimator, X, y, n_classes, seed, weights, proximal_mu=...)`` (the engine's
    `_weights.started_model`), trained `epochs` epochs, one ``partial_fit`` call each,
    on its rows; with a positive `proximal_mu`, toward the weights each started from
    (FedProx, as `ProximalTerm`); `graphs`: the probe's. Returns each party's weights
    (`weights_of`) and its accuracy on its rows."""
    order = np.argsort([-len(item[1]) for item in items], kind="stable")
    started, targets = [], []
    for index in order:
        X, y, n_classes, seed, weights = items[index]
        with _GLOBAL_GENERATOR:
            model = start(estimator, X, y, n_classes, seed, weights, proximal_mu=proximal_mu)
            net, steps = learner_and_steps(model)
            generators = _generators(net, seed)
        rows = np.asarray(X if steps is None else steps.transform(X))
        started.append(Started(model, net, rows, *generators))
        targets.append(targets_for(net, y))
    nets = [one.net for one in started]
    stack = NetworkStack(nets, _unfold_convolutions(str(nets[0].device or "cpu")), graphs)
    stack.train(_runs_of(started, targets, [False] * len(started)), [1] * epochs,
                proximal=(proximal_mu, stack.weights.anchor()) if proximal_mu > 0 else None)
    own = stack.predictions(stack.predict_proba([one.rows for one in started],
                                                block_rows=block_rows))
    results: list[Optional[tuple[list, float]]] = [None] * len(items)
    for position, index in enumerate(order):
        n = len(targets[position])
        accuracy = float(np.mean(own[position][:n] == targets[position]))
        results[index] = (stack.weights_of(position), accuracy)
    return results


def fit_chunk(template, tasks, seeds, job, block_rows, graphs):
    """Fit every task of a chunk together, as `_fit_clone` fits one: returns, per task,
    ``(model, votes, training_accuracy, score)``, the model a `ClassCodeModel` holding
    an ordinary fitted clone, or None unless kept; `graphs`: the probe's traces of the
    module.

    Every task has rows of at least two classes; the nets learn the global class codes.
    The copies are stacked from the most rows to the fewest, so that those still in
    their epoch form one run (see `StackedOptimizer.step`).
    """
    order = np.argsort([-len(task.y) for task in tasks], kind="stable")
    results = _fit_ordered(template, [tasks[i] for i in order], [seeds[i] for i in order],
                           job, block_rows, graphs)
    in_order = [None] * len(tasks)
    for position, index in enumerate(order):
        in_order[index] = results[position]
    return in_order


def _fit_ordered(template, tasks, seeds, job, block_rows, graphs):
    X, n_classes, X_predict, keep_models = job.X, job.n_classes, job.X_predict, job.keep_models
    targets = [targets_for(template.template, task.y) for task in tasks]
    started = [started_clone(template, seed, take_rows(X, task.rows), target)
               for task, seed, target in zip(tasks, seeds, targets)]
    nets = [one.net for one in started]
    keep = [keep_models or task.score is not None for task in tasks]
    stack = NetworkStack(nets, _unfold_convolutions(str(nets[0].device or "cpu")), graphs)
    stack.train(_runs_of(started, targets, keep), [nets[0].max_epochs])
    votes = [None] * len(tasks)
    if X_predict is not None:
        votes = _votes(stack, template, started, X_predict, n_classes, job.soft_votes,
                       block_rows)
    accuracies = [None] * len(tasks)
    if job.score_training:
        own = stack.predictions(stack.predict_proba([one.rows for one in started],
                                                    block_rows=block_rows))
        accuracies = [np.mean(p[: len(y)] == y) for p, y in zip(own, targets)]
    results = []
    for index, (one, task) in enumerate(zip(started, tasks)):
        model = None
        if keep[index]:
            stack.write_back(index, one.net)
            set_inferred_classes(one.net, np.unique(targets[index]))
            model = ClassCodeModel(one.estimator, np.arange(n_classes))
        score = None if task.score is None else task.score(model, X)
        results.append((model if keep_models else None, votes[index], accuracies[index],
                        score))
    return results


def _votes(stack, template, started, X_predict, n_classes, soft_votes, block_rows):
    """Each copy's votes on `X_predict`: through each clone's own steps before its
    net (one transform for all where the steps learn nothing)."""
    shared = not stateful_steps(template.template)
    rows: Union[np.ndarray, list]
    if shared:
        first_steps = learner_and_steps(started[0].estimator)[1]
        rows = np.asarray(X_predict if first_steps is None
                          else first_steps.transform(X_predict))
    else:
        rows = [learner_and_steps(one.estimator)[1].transform(X_predict) for one in started]
    proba = stack.predict_proba(rows, shared=shared, block_rows=block_rows)
    if soft_votes:
        return [p.astype(np.float32) for p in proba]
    return [codes.astype(code_dtype(n_classes)) for codes in stack.predictions(proba)]
