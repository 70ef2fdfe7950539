"""Many copies of one torch network trained together, as one stacked module.

A tier of FedKT (or of any algorithm) fits many clones of the same skorch net, each on
its own rows. Fitted one by one, each clone pays skorch's per-step machinery (datasets,
collation, callbacks, history) and tiny matrix products that leave a CPU's vector units
and a GPU idle. Here every clone's parameters are stacked along a new first axis and
trained in one loop: each step runs every copy's next minibatch at once
(``torch.func.vmap`` over ``functional_call``), with a loss masked per copy and an
optimizer whose state and step count are per copy. What comes back is, per clone,
what a separate ``fit`` with the same seed gives (same initial weights, same minibatch
order, the same optimizer arithmetic), within floating-point tolerance: the engine
writes it into ordinary fitted skorch nets.

Only settings this loop reproduces faithfully are served (`stacking_refusal`,
`module_refusal`); anything else takes the per-clone path, which says why.
"""

import copy
import time
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from skorch import NeuralNetClassifier
from skorch.dataset import Dataset
from torch import nn
from torch.func import functional_call, vmap
from torch.optim.adam import adam
from torch.optim.sgd import sgd
from torch.utils.data import DataLoader

# the optimizers whose update is elementwise, applied here by torch's own functional
# update to each copy; their options that are neither read nor refused only choose
# an implementation (foreach, fused, capturable)
_ADAM_OPTIONS = {"lr", "betas", "eps", "weight_decay", "amsgrad", "decoupled_weight_decay",
                 "maximize", "foreach", "capturable", "differentiable", "fused",
                 "initial_lr"}
_SGD_OPTIONS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize",
                "foreach", "differentiable", "fused", "initial_lr"}
_OPTIMIZERS = {torch.optim.Adam: _ADAM_OPTIONS, torch.optim.AdamW: _ADAM_OPTIONS,
               torch.optim.SGD: _SGD_OPTIONS}

# modules whose training draws from torch's global generator or keeps statistics of
# the batches it sees (padded rows would enter them), or runs a loop per sequence
_UNSTACKABLE_MODULES = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._NormBase,
                        nn.RNNBase)

# modules that train no faster stacked than one by one on the CPU: vmap makes a
# convolution of stacked weights a grouped one, which the CPU runs no faster than the
# convolutions one after another (the paper's CNN, 100 teachers on 3x32x32 images:
# 74 s stacked against 61 s one by one, bench_networks.py --device cpu)
CPU_UNHELPED_MODULES = (nn.modules.conv._ConvNd,)


def stacking_refusal(estimator):
    """Why clones of `estimator` cannot be trained together as separate fits would
    train them, or None when they can (the module itself is checked once built, by
    `module_refusal`).

    Served: skorch's `NeuralNetClassifier` itself (a subclass may change any step),
    alone or as a Pipeline's last step, with no callbacks of the user's, no
    validation split, minibatches in row order, the cross-entropy or negative
    log-likelihood criterion, and Adam, AdamW or SGD with one parameter group.
    """
    net, _ = _learner_and_steps(estimator)
    name = type(net).__name__
    if type(net) is not NeuralNetClassifier:
        return (f"{name} is not skorch's NeuralNetClassifier, whose training steps the "
                "stacked path reproduces")
    if net.callbacks not in (None, "disable") and len(net.callbacks):
        return "callbacks: they act on each net's own training loop"
    if net.train_split is not None:
        return "train_split: each net would hold out its own validation rows"
    if net.optimizer not in _OPTIMIZERS:
        return (f"optimizer {getattr(net.optimizer, '__name__', net.optimizer)}: the "
                "stacked path steps Adam, AdamW and SGD")
    if "param_groups" in net.get_params_for_optimizer("optimizer", [])[1]:
        return "optimizer__param_groups: the stacked path steps one parameter group"
    if net.criterion not in (nn.CrossEntropyLoss, nn.NLLLoss):
        return (f"criterion {getattr(net.criterion, '__name__', net.criterion)}: the "
                "stacked path computes CrossEntropyLoss and NLLLoss")
    loader = net.get_params_for("iterator_train")
    if net.iterator_train is not DataLoader or set(loader) - {"batch_size", "shuffle"}:
        return "iterator_train: the stacked path draws minibatches as a plain DataLoader"
    if loader.get("shuffle", False):
        return ("iterator_train__shuffle=True: each net draws its order from torch's "
                "global generator")
    if net.dataset is not Dataset:
        return "dataset: the stacked path reads rows as skorch's Dataset"
    if net.compile:
        return "compile=True: the stacked path runs the module uncompiled"
    return None


def module_refusal(module, criterion, optimizer):
    """Why an initialised net's module, criterion or optimizer cannot be stacked, or
    None: modules that draw random numbers or keep batch statistics, a criterion
    reduced other than by its mean, optimizer options not reproduced here."""
    for name, part in module.named_modules():
        if isinstance(part, _UNSTACKABLE_MODULES):
            return (f"module {name or 'itself'} ({type(part).__name__}) draws random "
                    "numbers, keeps batch statistics or loops over sequences in training")
    if criterion.reduction != "mean":
        return f"criterion reduction={criterion.reduction!r}: the stacked path takes the mean"
    if len(optimizer.param_groups) != 1:
        return "the optimizer has several parameter groups"
    options = {key: value for key, value in optimizer.param_groups[0].items()
               if key != "params"}
    unknown = set(options) - _OPTIMIZERS[type(optimizer)]
    if unknown:
        return f"optimizer options {sorted(unknown)} are not reproduced by the stacked path"
    if options.get("maximize") or options.get("differentiable"):
        return "optimizer maximize/differentiable: not reproduced by the stacked path"
    return None


class _Optimizer:
    """Adam (AdamW) or SGD over stacked parameters, each copy with its own state and
    step count: torch's own update (its functional form, fused where torch offers it)
    applied to the copies that have a minibatch in this step, so that a copy whose
    epoch is over is left exactly as it is. While every copy steps, and has stepped
    as often as the others, the update runs on the stacked tensors at once."""

    def __init__(self, optimizer, params):
        group = optimizer.param_groups[0]
        self.options = {key: (float(value) if torch.is_tensor(value) else value)
                        for key, value in group.items() if key != "params"}
        self.adam = isinstance(optimizer, torch.optim.Adam)
        self.counts = np.zeros(len(params[0]), dtype=np.int64)
        self.fused = (params[0].device.type in ("cpu", "cuda")
                      and params[0].dtype in (torch.float32, torch.float64))
        # fused updates keep their step counts where the parameters are
        self.step_device = params[0].device if self.fused else torch.device("cpu")
        if self.adam:
            self.moments = [[torch.zeros_like(p) for p in params] for _ in range(2)]
            self.max_moments = ([torch.zeros_like(p) for p in params]
                                if self.options["amsgrad"] else [])
        else:
            self.momentum_buffers = [None] * len(params)

    @torch.no_grad()
    def step(self, params, grads, active):
        """One step of the copies where `active` (bool per copy) with their `grads`.

        The copies that step with the same count are updated as runs of consecutive
        copies, each a slice of the stacked tensors: one run when all step together,
        a few when the copies are ordered by their number of minibatches."""
        runs = _runs(self.counts, active)

        def views(stacked):
            if runs == [(0, len(self.counts))]:
                return list(stacked)
            return [tensor[start:stop] for start, stop in runs for tensor in stacked]

        # one count per updated tensor: the update adds one to each before using it
        counts = np.repeat([self.counts[start] for start, _ in runs], len(params))
        steps = list(torch.tensor(counts, dtype=torch.float32,
                                  device=self.step_device).unbind(0))
        o = self.options
        if self.adam:
            adam(views(params), views(grads), views(self.moments[0]),
                 views(self.moments[1]), views(self.max_moments), steps, foreach=False,
                 fused=self.fused, amsgrad=o["amsgrad"], beta1=o["betas"][0],
                 beta2=o["betas"][1], lr=o["lr"], weight_decay=o["weight_decay"],
                 eps=o["eps"], maximize=False,
                 decoupled_weight_decay=o.get("decoupled_weight_decay", False))
        elif self.momentum_buffers[0] is None:  # the first step: every copy steps
            sgd(params, grads, self.momentum_buffers, **self._sgd_options())
        else:
            sgd(views(params), views(grads), views(self.momentum_buffers),
                **self._sgd_options())
        self.counts[active] += 1

    def _sgd_options(self):
        o = self.options
        return dict(foreach=False, fused=self.fused, weight_decay=o["weight_decay"],
                    momentum=o["momentum"], lr=o["lr"], dampening=o["dampening"],
                    nesterov=o["nesterov"], maximize=False)

    def state_of(self, copy_index):
        """Copy `copy_index`'s optimizer state per parameter, as torch's optimizer
        keeps it after the same steps."""
        if self.adam:
            names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if self.max_moments else [])
            tensors = [*self.moments, *([self.max_moments] if self.max_moments else [])]
            step = torch.tensor(float(self.counts[copy_index]), device=self.step_device)
            return [dict(step=step.clone(), **{name: kind[i][copy_index].clone()
                                               for name, kind in zip(names, tensors)})
                    for i in range(len(self.moments[0]))]
        return [{"momentum_buffer": None if buffer is None else buffer[copy_index].clone()}
                for buffer in self.momentum_buffers]


# layers that act on each row's features alone, whatever axes come before them
_ELEMENTWISE = (nn.ReLU, nn.LeakyReLU, nn.ELU, nn.SELU, nn.GELU, nn.SiLU, nn.Tanh,
                nn.Sigmoid, nn.Softplus, nn.Identity)


def _dense_chain(module, param_names):
    """The layers of `module` as a chain that batched matrix products run directly
    (a vmapped forward pass costs far more than its arithmetic for small dense
    networks), or None: its traced forward pass must apply, one after the other, only
    dense layers, elementwise activations and softmaxes over the last axis."""
    try:
        graph = torch.fx.symbolic_trace(module).graph
    except Exception:  # noqa: BLE001 - not traceable: vmap runs it
        return None
    index = {name: i for i, name in enumerate(param_names)}
    chain, previous = [], None
    for node in graph.nodes:
        if node.op == "placeholder" and previous is None:
            previous = node
        elif node.op == "call_module" and list(node.args) == [previous] and not node.kwargs:
            layer = module.get_submodule(node.target)
            if isinstance(layer, nn.Linear):
                chain.append(("linear", index[f"{node.target}.weight"],
                              index.get(f"{node.target}.bias")))
            elif isinstance(layer, (nn.Softmax, nn.LogSoftmax)) and layer.dim in (1, -1):
                chain.append(("softmax", isinstance(layer, nn.LogSoftmax), None))
            elif type(layer) in _ELEMENTWISE:
                chain.append(("elementwise", layer, None))
            else:
                return None
            previous = node
        elif node.op == "output" and node.args == (previous,) and chain:
            return chain
        else:
            return None
    return None


def _chain_forward(chain, params, X):
    """`_dense_chain`'s layers on stacked weights: rows `X` of shape (copies, rows,
    features), or (rows, features) shared by every copy."""
    out = X
    for kind, first, second in chain:
        if kind == "linear":
            weight = params[first].transpose(1, 2)
            out = (torch.matmul(out, weight) if second is None else
                   torch.baddbmm(params[second].unsqueeze(1), out, weight) if out.dim() == 3
                   else torch.matmul(out, weight) + params[second].unsqueeze(1))
        elif kind == "softmax":
            out = (F.log_softmax if first else F.softmax)(out, dim=-1)
        else:
            out = first(out)
    return out


def _runs(counts, active):
    """``(start, stop)`` of each run of consecutive active copies with equal counts."""
    runs, start = [], None
    for index in range(len(counts) + 1):
        ends = (index == len(counts) or not active[index]
                or (start is not None and counts[index] != counts[start]))
        if start is not None and ends:
            runs.append((start, index))
            start = None
        if index < len(counts) and active[index] and start is None:
            start = index
    return runs


def _padded(arrays, n_slots, fill, device, dtype=None):
    """One tensor of shape (len(arrays), n_slots, ...): each array's rows, then `fill`."""
    first = torch.as_tensor(arrays[0])
    out = torch.full((len(arrays), n_slots, *first.shape[1:]), fill,
                     dtype=dtype or first.dtype, device=device)
    for index, array in enumerate(arrays):
        out[index, : len(array)] = torch.as_tensor(array, device=device)
    return out


class NetworkStack:
    """Copies of one skorch net's module, stacked, trained together on each copy's
    own rows, and read back per copy.

    Parameters
    ----------
    nets : list of NeuralNetClassifier
        Initialised nets of the same settings, each holding its copy's starting
        weights (as ``initialize`` drew them under its seed, or loaded).
    """

    def __init__(self, nets):
        first = nets[0]
        self.nets, self.device = nets, torch.device(first.device or "cpu")
        module = first.module_
        self.param_names = [name for name, _ in module.named_parameters()]
        self.buffer_names = [name for name, _ in module.named_buffers()]
        self.params = [torch.stack([dict(net.module_.named_parameters())[name].detach()
                                    for net in nets]).to(self.device)
                       for name in self.param_names]
        self.buffers = [torch.stack([dict(net.module_.named_buffers())[name]
                                     for net in nets]).to(self.device)
                        for name in self.buffer_names]
        self.trainable = [dict(module.named_parameters())[name].requires_grad
                          for name in self.param_names]
        self.criterion = first.criterion_
        self.nll = isinstance(self.criterion, nn.NLLLoss)
        self.batch_size = first.get_params_for("iterator_train").get("batch_size",
                                                                      first.batch_size)
        # made by the first `train`, once the weights take their gradients' layout
        self.optimizer = None
        self._torch_optimizer = first.optimizer_
        base = copy.deepcopy(module).to("meta")

        def forward(params, buffers, X):
            return functional_call(
                base, ({**dict(zip(self.param_names, params)),
                        **dict(zip(self.buffer_names, buffers))}), (X,))

        self._forward = forward
        self._chain = _dense_chain(module, self.param_names)

    def forward(self, X, shared=False):
        """Every copy's output on its own rows `X` (copies first), or on the same rows
        with `shared`: batched matrix products for a chain of dense layers, else
        ``vmap`` over the module's own forward pass."""
        if self._chain is not None:
            return _chain_forward(self._chain, self.params, X)
        return vmap(self._forward, in_dims=(0, 0, None if shared else 0))(
            self.params, self.buffers, X)

    def _per_row_losses(self, output, targets):
        """Each row's loss as the criterion weighs it (0 for an ignored row)."""
        criterion = self.criterion
        flat, targets = output.reshape(-1, output.shape[-1]), targets.reshape(-1)
        if self.nll:  # skorch gives NLLLoss the log of the module's probabilities
            return F.nll_loss(torch.log(flat + torch.finfo(flat.dtype).eps), targets,
                              weight=criterion.weight, ignore_index=criterion.ignore_index,
                              reduction="none")
        return F.cross_entropy(flat, targets, weight=criterion.weight,
                               ignore_index=criterion.ignore_index, reduction="none",
                               label_smoothing=criterion.label_smoothing)

    def _denominators(self, targets, n_steps, batch):
        """What each copy's mean loss divides by in each step, shape (n_steps,
        n_copies): its rows' total weight (their number without class weights), as
        the criterion's mean over that copy's minibatch alone; 1 where it has none."""
        criterion = self.criterion
        counted = targets != criterion.ignore_index
        weights = (counted.to(self.params[0].dtype) if criterion.weight is None
                   else torch.where(counted, criterion.weight[targets.clamp(min=0)], 0))
        totals = weights.view(len(targets), n_steps, batch).sum(dim=2).T
        return torch.where(totals > 0, totals, 1)

    def _trained(self):
        """The stacked weights that train, requiring gradients."""
        return [param.requires_grad_(True)
                for param, train in zip(self.params, self.trainable) if train]

    def _take_gradient_layout(self, grads):
        """Store each trained weight in the memory layout its gradient comes in (a
        batched matrix product gives a transposed one), so that no step copies a
        gradient into the weight's layout."""
        grads = iter(grads)
        for index, train in enumerate(self.trainable):
            if train:
                grad = next(grads)
                if grad.stride() != self.params[index].stride():
                    with torch.no_grad():
                        self.params[index] = torch.empty_like(grad).copy_(self.params[index])

    def train(self, X, y, epochs, proximal=None):
        """Train every copy `epochs` epochs on its rows, as ``fit`` would: minibatches of
        ``batch_size`` rows in row order (the last one shorter), one optimizer step
        each.

        Parameters
        ----------
        X, y : list of ndarray
            Each copy's rows (as its module takes them) and class codes.
        epochs : int
        proximal : (float, list of Tensor), default=None
            FedProx: ``mu`` and the stacked anchor weights; every step's gradient gains
            ``mu * (w - anchor)``, as `ProximalTerm` adds it.

        Returns
        -------
        losses : ndarray of shape (epochs, n_steps, n_copies)
            Each copy's loss of each step (NaN where it had no minibatch).
        """
        n_rows = np.array([len(rows) for rows in y])
        batch = int(n_rows.max()) if self.batch_size == -1 else int(self.batch_size)
        n_steps = -(-int(n_rows.max()) // batch)
        X_stack = _padded(X, n_steps * batch, 0, self.device)
        # rows past a copy's own are ignored by its loss, as if absent
        targets = _padded(y, n_steps * batch, self.criterion.ignore_index, self.device,
                          dtype=torch.int64)
        denominators = self._denominators(targets, n_steps, batch)
        active = n_rows[None] > np.arange(n_steps)[:, None] * batch
        losses = torch.empty((epochs, n_steps, len(n_rows)), device=self.device,
                             dtype=self.params[0].dtype)
        def step_gradients(step):
            rows = slice(step * batch, (step + 1) * batch)
            per_row = self._per_row_losses(self.forward(X_stack[:, rows]), targets[:, rows])
            loss = per_row.view(len(n_rows), -1).sum(dim=1) / denominators[step]
            return loss, torch.autograd.grad(loss.sum(), trained)

        trained = self._trained()
        if self.optimizer is None:
            self._take_gradient_layout(step_gradients(0)[1])
            trained = self._trained()
            self.optimizer = _Optimizer(self._torch_optimizer, trained)
        for epoch in range(epochs):
            for step in range(n_steps):
                loss, grads = step_gradients(step)
                # the fused updates read a gradient in its parameter's layout
                grads = [grad if grad.stride() == param.stride()
                         else torch.empty_like(param).copy_(grad)
                         for grad, param in zip(grads, trained)]
                if proximal is not None:
                    grads = _with_proximal_term(grads, trained, proximal, active[step])
                self.optimizer.step(trained, grads, active[step])
                losses[epoch, step] = loss.detach()
        for param in trained:
            param.requires_grad_(False)
        losses = losses.cpu().numpy()
        losses[:, ~active] = np.nan
        return losses

    @torch.no_grad()
    def predict_proba(self, X, shared=False, block_rows=4096):
        """Every copy's class probabilities, as its net's ``predict_proba`` gives them,
        shape (n_copies, n_rows, n_outputs): on the same rows `X` with `shared`, else
        on each copy's own (a list); `block_rows` rows at a time."""
        nonlinearity = self.nets[0]._get_predict_nonlinearity()
        n_rows = len(X) if shared else max(len(rows) for rows in X)
        outputs = []
        for start in range(0, n_rows, block_rows):
            block = (torch.as_tensor(X[start : start + block_rows], device=self.device)
                     if shared else _padded([rows[start : start + block_rows] for rows in X],
                                            min(block_rows, n_rows - start), 0, self.device))
            output = self.forward(block, shared=shared)
            outputs.append(torch.stack([nonlinearity(out) for out in output]).cpu())
        return torch.cat(outputs, dim=1).numpy()

    def weights_of(self, index):
        """Copy `index`'s state as its module's ``state_dict`` lists it: float64 arrays
        (what FedAvg averages)."""
        stacked = dict(zip(self.param_names + self.buffer_names, self.params + self.buffers))
        return [stacked[name][index].detach().cpu().numpy().astype(float)
                for name in self.nets[0].module_.state_dict()]

    def write_back(self, index, net, losses, n_rows, seconds):
        """Copy `index`'s trained weights, optimizer state and training history into
        `net` (initialised from the same seed), as its own ``fit`` leaves them."""
        with torch.no_grad():
            for name, stacked in zip(self.param_names, self.params):
                dict(net.module_.named_parameters())[name].copy_(stacked[index])
            for name, stacked in zip(self.buffer_names, self.buffers):
                dict(net.module_.named_buffers())[name].copy_(stacked[index])
        parameters = [dict(net.module_.named_parameters())[name]
                      for name, train in zip(self.param_names, self.trainable) if train]
        for param, state in zip(parameters, self.optimizer.state_of(index)):
            net.optimizer_.state[param] = state
        _record_history(net, losses[:, :, index], n_rows, self.batch_size, seconds)


def _with_proximal_term(grads, params, proximal, active):
    """FedProx's gradient: ``mu * (w - anchor)`` added for the copies that step (the
    others' gradients stay zero, as they take no step)."""
    mu, anchor = proximal
    on = torch.as_tensor(active, device=params[0].device)
    return [grad + mu * (param - fixed) * on.view((-1,) + (1,) * (param.dim() - 1)).to(
        param.dtype) for grad, param, fixed in zip(grads, params, anchor)]


def _record_history(net, losses, n_rows, batch_size, seconds):
    """`net`'s history as skorch's own loop records it: per epoch its minibatches'
    losses and sizes, their weighted mean loss, whether it is the best, the time."""
    batch = n_rows if batch_size == -1 else batch_size
    sizes = [min(batch, n_rows - start) for start in range(0, n_rows, batch)]
    best = np.inf
    for epoch, epoch_losses in enumerate(losses, start=1):
        net.history.new_epoch()
        net.history.record("epoch", epoch)
        for loss, size in zip(epoch_losses, sizes):
            net.history.new_batch()
            net.history.record_batch("train_loss", float(loss))
            net.history.record_batch("train_batch_size", size)
        net.history.record("train_batch_count", len(sizes))
        net.history.record("dur", seconds / len(losses))
        mean = float(np.average(epoch_losses[: len(sizes)], weights=sizes))
        net.history.record("train_loss", mean)
        net.history.record("train_loss_best", bool(mean < best))
        best = min(best, mean)
    for name, callback in net.callbacks_:
        if name == "train_loss":
            callback.best_score_ = best


def _learner_and_steps(estimator):
    """A clone's net and what its rows go through before it (None: nothing)."""
    if hasattr(estimator, "steps"):
        return estimator.steps[-1][1], (estimator[:-1] if len(estimator.steps) > 1 else None)
    return estimator, None


def _shares_transform(estimator):
    """Whether every clone transforms rows the same way before its net: no step, or
    only steps that learn nothing (FunctionTransformer, passthrough)."""
    from sklearn.preprocessing import FunctionTransformer

    _, steps = _learner_and_steps(estimator)
    return steps is None or all(isinstance(step, FunctionTransformer) or step in (None, "passthrough")
                                for _, step in steps.steps)


def started_clone(template, seed, X, y):
    """A clone of the template seeded with `seed` (`SeededTemplate`), its net
    initialised as its ``fit`` would initialise it, and `X` through the clone's
    fitted steps before the net: what its net trains on."""
    estimator = template.clone(seed)
    net, steps = _learner_and_steps(estimator)
    net.initialize()
    return estimator, net, (X if steps is None else steps.fit_transform(X, y))


# what one chunk of copies may hold on the CPU (weights, gradients, optimizer state,
# rows and activations, as `_bytes_per_copy` estimates them), and at most how many
# copies: on the CPU a step's time grows with the copies, so small chunks cost little
# and keep copies of like sizes together; on a GPU, half its free memory
CPU_CHUNK_BYTES = 256 * 2**20
_MAX_COPIES = {"cpu": 64, "cuda": 1024}
# what the votes of one chunk may hold at once (activations of a block of rows)
VOTE_BLOCK_BYTES = 64 * 2**20


class Probe(NamedTuple):
    """What one clone of a tier tells before the tier is stacked."""

    refusal: str
    """Why the tier cannot be stacked, or None."""
    copies_per_chunk: int
    """How many copies one chunk holds."""
    device: str
    """Where the copies train."""
    row_bytes: int = 0
    """What one row holds in one copy's forward pass (its activations)."""

    def block_rows(self, n_copies):
        """Rows that `n_copies` copies vote on at once within `VOTE_BLOCK_BYTES`."""
        return int(max(1, VOTE_BLOCK_BYTES // max(1, n_copies * self.row_bytes)))


def probe(template, seed, X, y, n_classes, max_rows):
    """Whether and how the nets of `template` stack, found on one clone (seeded with
    `seed`, on rows `X`, `y` of a task) and two copies of it: its settings
    (`module_refusal`), rows that are not one array, an output other than one column
    per class, or an operation ``torch.func.vmap`` cannot batch refuse it. A forward
    pass that fails on the net itself (rows of the wrong dtype, say) is left to the
    per-clone fit, which names the fix. `max_rows`: the most rows a copy learns."""
    _, net, rows = started_clone(template, seed, X, y)
    device = str(net.device or "cpu")

    def refused(reason):
        return Probe(reason, 0, device)

    reason = module_refusal(net.module_, net.criterion_, net.optimizer_)
    if reason is not None:
        return refused(reason)
    unhelped = [type(part).__name__ for part in net.module_.modules()
                if isinstance(part, CPU_UNHELPED_MODULES)]
    if unhelped and torch.device(device).type == "cpu":
        return refused(f"{unhelped[0]}: on the CPU, stacked convolutions train no faster "
                       "than one by one")
    if not isinstance(rows, np.ndarray) or rows.dtype == object:
        return refused(f"the net's rows are {type(rows).__name__}, not one numeric array")
    sample = torch.as_tensor(rows[:2], device=device)
    activations = []
    hooks = [part.register_forward_hook(lambda m, i, out: activations.append(
                 _activation_elements(m, out)))
             for part in net.module_.modules() if not list(part.children())]
    try:
        with torch.no_grad():
            output = net.module_(sample)
    except Exception:  # noqa: BLE001 - the per-clone fit raises it, in its own words
        return refused("the module fails on these rows (the per-clone fit says why)")
    finally:
        for hook in hooks:
            hook.remove()
    if not torch.is_tensor(output) or output.shape != (len(sample), n_classes):
        return refused(f"the module's output is not one column per class ({n_classes})")
    try:
        NetworkStack([net, copy.deepcopy(net)]).train(
            [rows[:2]] * 2, [np.asarray(y[:2], dtype=np.int64)] * 2, epochs=1)
    except Exception as exc:  # noqa: BLE001 - whatever vmap cannot batch
        return refused(f"torch.func cannot stack the module ({type(exc).__name__}: {exc})")
    batch = net.get_params_for("iterator_train").get("batch_size", net.batch_size)
    batch = max_rows if batch == -1 else min(batch, max_rows)
    row_activations = sum(activations) / len(sample)
    per_copy = _bytes_per_copy(net, max_rows * rows[0].size, row_activations * batch,
                               max_rows)
    kind = torch.device(device).type
    budget = (torch.cuda.mem_get_info(torch.device(device))[0] // 2 if kind == "cuda"
              else CPU_CHUNK_BYTES)
    itemsize = next(net.module_.parameters()).element_size()
    return Probe(None, int(max(1, min(_MAX_COPIES.get(kind, 64), budget // per_copy))),
                 device, int(row_activations * itemsize))


def _activation_elements(module, output):
    """Elements a layer's forward pass holds: its output, and for a convolution the
    unfolded input it multiplies (input channels x kernel area per output position)."""
    elements = output.numel() if torch.is_tensor(output) else 0
    if isinstance(module, nn.modules.conv._ConvNd):
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


def train_from_weights(models, X, y, epochs, proximal_mu, block_rows):
    """Train started models (FedAvg's local training: nets carrying the global weights
    and a fresh optimizer, after stateless steps) `epochs` epochs together, each on
    its own rows; with a positive `proximal_mu`, toward the weights each started
    from (FedProx, as `ProximalTerm`). Returns each model's weights (`weights_of`) and
    its accuracy on its own rows."""
    order = np.argsort([-len(labels) for labels in y], kind="stable")
    nets, rows, labels = [], [], []
    for index in order:
        net, steps = _learner_and_steps(models[index])
        nets.append(net)
        rows.append(np.asarray(X[index] if steps is None else steps.transform(X[index])))
        labels.append(np.asarray(y[index], dtype=np.int64))
    stack = NetworkStack(nets)
    anchor = [p.detach().clone() for p, train in zip(stack.params, stack.trainable) if train]
    stack.train(rows, labels, epochs, proximal=(proximal_mu, anchor) if proximal_mu > 0
                else None)
    own = stack.predict_proba(rows, block_rows=block_rows)
    results = [None] * len(models)
    for position, index in enumerate(order):
        accuracy = float(np.mean(own[position][: len(labels[position])].argmax(axis=1)
                                 == labels[position]))
        results[index] = (stack.weights_of(position), accuracy)
    return results


def fit_chunk(template, tasks, seeds, X, n_classes, X_predict, soft_votes, keep_models,
              score_training, take_rows, model_type, block_rows):
    """Fit every task of a chunk together, as `_fit_clone` fits one: returns, per task,
    ``(model, votes, training_accuracy, score)``, the model a `model_type` (the
    engine's ClassCodeModel) holding an ordinary fitted clone, or None unless kept.

    Every task has rows of at least two classes; the nets learn the global class codes.
    The copies are stacked from the most rows to the fewest, so that those still in
    their epoch form one run (see `_Optimizer.step`).
    """
    order = np.argsort([-len(task.y) for task in tasks], kind="stable")
    results = _fit_ordered(template, [tasks[i] for i in order], [seeds[i] for i in order],
                           X, n_classes, X_predict, soft_votes, keep_models, score_training,
                           take_rows, model_type, block_rows)
    in_order = [None] * len(tasks)
    for position, index in enumerate(order):
        in_order[index] = results[position]
    return in_order


def _fit_ordered(template, tasks, seeds, X, n_classes, X_predict, soft_votes, keep_models,
                 score_training, take_rows, model_type, block_rows):
    start = time.perf_counter()
    labels = [np.asarray(task.y, dtype=np.int64) for task in tasks]
    started = [started_clone(template, seed, take_rows(X, task.rows), y)
               for task, seed, y in zip(tasks, seeds, labels)]
    nets = [net for _, net, _ in started]
    rows = [np.asarray(transformed) for _, _, transformed in started]
    stack = NetworkStack(nets)
    losses = stack.train(rows, labels, nets[0].max_epochs)
    votes = [None] * len(tasks)
    if X_predict is not None:
        shared = _shares_transform(template.template)
        _, steps = _learner_and_steps(started[0][0])
        X_votes = (X_predict if steps is None else steps.transform(X_predict)) if shared else [
            (X_predict if s is None else s.transform(X_predict))
            for s in (_learner_and_steps(estimator)[1] for estimator, _, _ in started)]
        proba = stack.predict_proba(np.asarray(X_votes) if shared else X_votes, shared=shared,
                                    block_rows=block_rows)
        code_type = np.int8 if n_classes < 128 else np.int16 if n_classes < 32768 else np.int32
        votes = [p.astype(np.float32) if soft_votes else p.argmax(axis=1).astype(code_type)
                 for p in proba]
    accuracies = [None] * len(tasks)
    if score_training:
        own = stack.predict_proba(rows, block_rows=block_rows)
        accuracies = [np.mean(p[: len(y)].argmax(axis=1) == y) for p, y in zip(own, labels)]
    seconds = time.perf_counter() - start
    results = []
    for index, ((estimator, net, _), task) in enumerate(zip(started, tasks)):
        model = None
        if keep_models or task.score is not None:
            stack.write_back(index, net, losses, len(task.y), seconds)
            net.classes_inferred_ = np.unique(labels[index])
            model = model_type(estimator, np.arange(n_classes))
        score = None if task.score is None else task.score(model, X)
        results.append((model if keep_models else None, votes[index], accuracies[index],
                        score))
    return results
