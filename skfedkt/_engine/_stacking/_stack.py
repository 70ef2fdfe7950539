"""Copies of one skorch net's module, stacked, trained together each on its own rows,
and read back per copy."""

from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from skorch import NeuralNetBinaryClassifier
from torch import nn

from . import _graphs
from ._forward import BatchRows, Draws, Stacked, StackedForward
from ._optimizer import StackedOptimizer


def padded(arrays, n_slots, fill, device, dtype=None):
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
    nets : list of skorch.NeuralNetClassifier or NeuralNetBinaryClassifier
        Initialised nets of the same settings, each holding its copy's starting
        weights (as ``initialize`` drew them under its seed, or loaded).
    unfold_convolutions : bool, default=False
        Whether 2-D convolutions run as unfolded patches times kernels.
    graphs : dict, default=None
        The module's traces (see `StackedForward`); traced here if None.
    """

    # the most steps an epoch takes (None: all of its minibatches); a trial that only
    # shows the stack can train sets it
    step_limit = None

    def __init__(self, nets, unfold_convolutions=False, graphs=None):
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
        self.binary = isinstance(first, NeuralNetBinaryClassifier)
        self.nll = isinstance(self.criterion, nn.NLLLoss)
        self.forward_pass = StackedForward(module, unfold_convolutions, graphs)
        # each weight's stored form: dense layers' lean (`lean_layers`), else the module's
        lean = {f"{layer}.{kind}": kind for layer in self.forward_pass.lean_layers
                for kind in ("weight", "bias")}
        self.forms = [lean.get(name) for name in self.param_names]
        self.params = [_stored(param, form) for param, form in zip(self.params, self.forms)]
        # made by the first `train`, once the weights take their gradients' layout
        self.optimizer = None
        self._captured = None
        self._torch_optimizer = first.optimizer_
        # each copy's learning rate, as its own optimizer holds it
        self.rates = np.array([float(net.optimizer_.param_groups[0]["lr"]) for net in nets])

    def forward(self, X, training=False, draws=None, rows=None):
        """Every copy's output on `X` (a `Stacked` value, each copy its own rows; or
        rows shared by every copy), as its net's ``infer`` gives it: a binary net's
        one column flattened."""
        out = self.forward_pass(dict(zip(self.param_names, self.params)),
                                dict(zip(self.buffer_names, self.buffers)), X, training,
                                draws, rows)
        return out.reshape(out.shape[0], out.shape[1]) if self.binary else out

    def _per_row_losses(self, output, targets):
        """Each row's loss as the criterion weighs it (0 for an ignored row)."""
        criterion = self.criterion
        if self.binary:
            return F.binary_cross_entropy_with_logits(
                output, targets, pos_weight=criterion.pos_weight, reduction="none")
        flat, targets = output.reshape(-1, output.shape[-1]), targets.reshape(-1)
        if self.nll:  # skorch gives NLLLoss the log of the module's probabilities
            return F.nll_loss(torch.log(flat + torch.finfo(flat.dtype).eps), targets,
                              weight=criterion.weight, ignore_index=criterion.ignore_index,
                              reduction="none")
        return F.cross_entropy(flat, targets, weight=criterion.weight,
                               ignore_index=criterion.ignore_index, reduction="none",
                               label_smoothing=criterion.label_smoothing)

    def _row_weights(self, targets, mask):
        """What each row counts in its copy's mean loss: 1, or its class's weight; 0
        for a row that pads its copy's minibatch."""
        weight = None if self.binary else self.criterion.weight
        mask = mask.to(self.params[0].dtype)
        if weight is None:
            return mask
        return weight[targets.clamp(min=0)] * mask

    def batch_losses(self, output, targets, mask, batch):
        """Each copy's mean loss over each of its minibatches of `batch` rows: the
        rows' losses weighed as the criterion's mean weighs them (over that copy's
        minibatch alone), shape (copies, minibatches); 0 where it has none."""
        n_copies = output.shape[0]
        weights = self._row_weights(targets, mask).view(n_copies, -1, batch)
        losses = (self._per_row_losses(output, targets).view(n_copies, -1, batch)
                  * (weights > 0)).sum(dim=2)
        totals = weights.sum(dim=2)
        return losses / torch.where(totals > 0, totals, 1)

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

    def train(self, copies, calls, proximal=None):
        """Train every copy as its net's ``partial_fit`` calls would: one call per
        entry of `calls`, of that many epochs (``fit`` is one call of ``max_epochs``).

        Parameters
        ----------
        copies : list of CopyRun
            Each copy's rows, targets, generator and callbacks, in the stack's order.
        calls : list of int
        proximal : (float, list of Tensor), default=None
            FedProx: ``mu`` and the stacked anchor weights; every step's gradient gains
            ``mu * (w - anchor)``, as `ProximalTerm` adds it.
        """
        with _denormals_flushed(self.device):
            self._train(copies, calls, proximal)

    def _train(self, copies, calls, proximal):
        self._captured = None  # a call's full steps, captured (`_captures`)
        for epochs in calls:
            for index, run in enumerate(copies):
                run.begin_call()  # a scheduler sets its first rate here
                self.rates[index] = run.learning_rate
            data = _CallData(self, copies)
            for _ in range(epochs):
                live = [index for index, run in enumerate(copies) if not run.stopped]
                if not live:
                    break
                for index in live:
                    copies[index].begin_epoch()
                losses = self._train_epoch(copies, data, live, proximal)
                self._end_epoch(copies, data, live, losses)
            for index, run in enumerate(copies):
                run.end_call()
                if _restores_weights(run.net):
                    self._read_module(index, run.net)
        self._captured = None  # its memory goes back

    def _train_epoch(self, copies, data, live, proximal):
        """One epoch of the `live` copies: each copy's minibatches in its own order, one
        optimizer step each; returns each copy's loss per step, (steps, copies)."""
        orders = [copies[index].epoch_order() if index in live else None
                  for index in range(len(copies))]
        X, targets, mask, n_rows = data.epoch(orders)
        batch = data.batch
        n_steps = X.shape[1] // batch
        rows_in_step = np.clip(n_rows[None] - np.arange(n_steps)[:, None] * batch, 0, batch)
        denominators = self._row_weights(targets, mask).view(len(copies), n_steps, batch).sum(
            dim=2).T
        denominators = torch.where(denominators > 0, denominators, 1)
        no_loss = torch.zeros(len(copies), device=self.device, dtype=self.params[0].dtype)
        generators = [run.noise_generator for run in copies]
        # which copies take each step, sent to the device once: a copy from the host
        # at every step would wait for the device
        actives = rows_in_step > 0
        stepping = torch.as_tensor(actives, device=self.device)
        losses = []
        for step, inputs in enumerate(zip(X.split(batch, dim=1), targets.split(batch, dim=1),
                                          mask.split(batch, dim=1), denominators.unbind(0),
                                          stepping.unbind(0))):
            if step == self.step_limit:
                break
            step_rows, active = rows_in_step[step], actives[step]
            if not active.any():  # the padding of copies that dropped a last minibatch
                losses.append(no_loss)
            elif self._captures(step_rows, batch, proximal):
                # a replayed graph's loss is its static output, which the next replay
                # overwrites
                losses.append(self._captured(float(self.rates[0]), inputs).clone())
                self.optimizer.counted(active)
            else:
                draws = Draws(generators, step_rows) if self.forward_pass.draws else None
                losses.append(self._step(inputs, proximal, step_rows, draws, active))
        for param in self._trained():
            param.requires_grad_(False)
        return torch.stack(losses).cpu().numpy() if losses else np.zeros((0, len(copies)))

    def _gradients(self, inputs, step_rows, draws=None):
        """Each copy's loss on a step's `inputs` and the gradients of the trained
        weights, in their layout (the first step makes the optimizer). `step_rows`:
        each copy's rows in the step, on the host, so that no check waits for the
        device."""
        X, targets, mask, denominators, on = inputs
        trained = self._trained()
        rows = BatchRows(mask, on, step_rows) if self.forward_pass.batch_norms else None
        out = self.forward(Stacked(X), training=True, draws=draws, rows=rows)
        per_row = self._per_row_losses(out, targets).view(len(X), -1)
        if self.binary:  # the other criteria give an ignored row no loss
            per_row = per_row * mask
        loss = per_row.sum(dim=1) / denominators
        grads = torch.autograd.grad(loss.sum(), trained)
        if self.optimizer is None:
            self._take_gradient_layout(grads)
            trained = self._trained()
            self.optimizer = StackedOptimizer(self._torch_optimizer, trained, self.rates)
        # the fused updates read a gradient in its parameter's layout
        return loss.detach(), [grad if grad.stride() == param.stride()
                               else torch.empty_like(param).copy_(grad)
                               for grad, param in zip(grads, trained)]

    def _step(self, inputs, proximal, step_rows, draws=None, active=None, together=False):
        """One step of the copies with rows in it; each copy's loss. `together`: every
        copy steps as one (`StackedOptimizer.steps_together`) on a full minibatch,
        without draws: device work alone, which `_captures` records once and replays,
        and which the caller counts."""
        loss, grads = self._gradients(inputs, step_rows, draws)
        if proximal is not None:
            grads = _with_proximal_term(grads, self._trained(), proximal, inputs[-1])
        if together:
            self.optimizer.update_together(grads)
        else:
            self.optimizer.step(grads, step_rows > 0 if active is None else active)
        return loss

    def _captures(self, step_rows, batch, proximal):
        """Whether this step replays a CUDA graph (`_graphs`): on a GPU, where every
        copy takes a full minibatch as one (one rate, one step count), with no dropout
        draw and no layer through ``vmap``."""
        if not (_graphs.CAPTURE_STEPS and self.device.type == "cuda"
                and self.optimizer is not None and not self.forward_pass.draws
                and not self.forward_pass.vmapped and (step_rows == batch).all()
                and self.optimizer.steps_together(step_rows > 0)):
            return False
        if self._captured is None:
            full = step_rows.copy()
            self._captured = _graphs.CapturedSteps(
                lambda *inputs: self._step(inputs, proximal, full, together=True))
        return True

    def _end_epoch(self, copies, data, live, losses):
        """Each live copy's validation pass, history and callbacks, which may stop it
        or change its learning rate."""
        valid = data.validation(self, [index for index in live if copies[index].events])
        for index in live:
            run = copies[index]
            n_steps = -(-run.n_epoch_rows // run.minibatch_size(len(run.train_rows)))
            if _restores_weights(run.net):
                self.write_weights(index, run.net)
            valid_losses, valid_output = valid.get(index, (None, None))
            run.end_epoch(losses[:n_steps, index], valid_losses, valid_output)
            self.rates[index] = run.learning_rate

    @torch.no_grad()
    def predict_proba(self, X, shared=False, block_rows=4096):
        """Every copy's class probabilities, as its net's ``predict_proba`` gives them,
        shape (n_copies, n_rows, n_classes): on the same rows `X` with `shared`, else
        on each copy's own (a list); `block_rows` rows at a time."""
        nonlinearity = self.nets[0]._get_predict_nonlinearity()
        n_rows = len(X) if shared else max(len(rows) for rows in X)
        outputs = []
        for start in range(0, n_rows, block_rows):
            block = (torch.as_tensor(X[start : start + block_rows], device=self.device)
                     if shared else Stacked(padded(
                         [rows[start : start + block_rows] for rows in X],
                         min(block_rows, n_rows - start), 0, self.device)))
            output = self.forward(block)
            outputs.append(torch.stack([nonlinearity(out) for out in output]).cpu())
        return torch.cat(outputs, dim=1).numpy()

    def predictions(self, proba):
        """Each copy's class codes from its probabilities, by its net's own rule (a
        binary net's threshold)."""
        if self.binary:
            return (proba[..., 1] > self.nets[0].threshold).astype(np.int64)
        return proba.argmax(axis=-1)

    def _in_module_form(self):
        """The stacked weights, then buffers, in their module's shapes (views)."""
        return [_module_form(param, form) for param, form in zip(self.params, self.forms)]

    def weights_of(self, index):
        """Copy `index`'s state as its module's ``state_dict`` lists it: float64 arrays
        (what FedAvg averages)."""
        stacked = dict(zip(self.param_names + self.buffer_names,
                           self._in_module_form() + self.buffers))
        return [stacked[name][index].detach().cpu().numpy().astype(float)
                for name in self.nets[0].module_.state_dict()]

    @torch.no_grad()
    def write_weights(self, index, net):
        """Copy `index`'s weights and buffers into `net`'s module."""
        for name, stacked in zip(self.param_names, self._in_module_form()):
            dict(net.module_.named_parameters())[name].copy_(stacked[index])
        for name, stacked in zip(self.buffer_names, self.buffers):
            dict(net.module_.named_buffers())[name].copy_(stacked[index])

    @torch.no_grad()
    def _read_module(self, index, net):
        """`net`'s module weights into copy `index` (a callback restored its best)."""
        for name, stacked in zip(self.param_names, self._in_module_form()):
            stacked[index].copy_(dict(net.module_.named_parameters())[name])
        for name, stacked in zip(self.buffer_names, self.buffers):
            stacked[index].copy_(dict(net.module_.named_buffers())[name])

    def write_back(self, index, net):
        """Copy `index`'s trained weights and optimizer state into `net` (the net whose
        history and callbacks the training ran), as its own ``fit`` leaves them."""
        self.write_weights(index, net)
        trained = [(name, form) for name, form, train
                   in zip(self.param_names, self.forms, self.trainable) if train]
        for (name, form), state in zip(trained, self.optimizer.state_of(index)):
            param = dict(net.module_.named_parameters())[name]
            net.optimizer_.state[param] = {
                key: value if key == "step" or value is None
                else _module_form(value.unsqueeze(0), form)[0]
                for key, value in state.items()}


def _stored(stacked, form):
    """Stacked weights (copies first, in their module's shape) as the stack stores
    them: a lean dense layer's weight transposed, (copies, in, out), its bias as
    (copies, 1, out) (`lean_layers`); any other as it is."""
    if form == "weight":
        return stacked.transpose(1, 2).contiguous()
    return stacked.unsqueeze(1) if form == "bias" else stacked


def _module_form(stored, form):
    """The inverse of `_stored`: a view in the module's shape, copies first."""
    if form == "weight":
        return stored.transpose(1, 2)
    return stored[:, 0] if form == "bias" else stored


@contextmanager
def _denormals_flushed(device):
    """Within, this thread's arithmetic on the CPU treats denormal numbers as zero.

    Adam's first moment of a weight whose gradient stays zero (one fed by a pixel that
    is always blank, or by a dead unit) shrinks tenfold every 22 steps, through the
    denormal range, where the CPU computes many times slower: on digits it made Adam's
    update most of a student's step. What flushing changes is below 1e-38, which no
    weight's update keeps (the tests compare every net with its separate fit).
    """
    if device.type != "cpu":
        yield
        return
    # torch sets the flag but cannot read it: a denormal times one is zero if it is set
    before = float(torch.tensor([1e-39]) * torch.tensor([1.0])) == 0.0
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


def _restores_weights(net):
    """Whether a callback of `net` reads or restores its module's weights between
    epochs (skorch's `EarlyStopping` with ``load_best``)."""
    from skorch.callbacks import EarlyStopping

    return any(isinstance(callback, EarlyStopping) and callback.load_best
               for _, callback in getattr(net, "callbacks_", []))


def _with_proximal_term(grads, params, proximal, on):
    """FedProx's gradient: ``mu * (w - anchor)`` added for the copies that step (`on`,
    a bool per copy on the device; the others' gradients stay zero, as they take no
    step)."""
    mu, anchor = proximal
    return [grad + mu * (param - fixed) * on.view((-1,) + (1,) * (param.dim() - 1)).to(
        param.dtype) for grad, param, fixed in zip(grads, params, anchor)]


class _CallData:
    """The copies' rows of one ``partial_fit`` call, padded and on the stack's device:
    every row for the minibatches, each copy's validation rows."""

    def __init__(self, stack, copies):
        self.stack, self.copies = stack, copies
        device = stack.device
        n_train = np.array([len(run.train_rows) for run in copies])
        # every copy has its net's batch size; -1 is each copy's whole training set:
        # one step of all its rows
        self.batch = (int(n_train.max()) if copies[0].batch_size == -1
                      else int(copies[0].batch_size))
        self.n_slots = -(-int(n_train.max()) // self.batch) * self.batch
        self.X = padded([run.X for run in copies], max(len(run.X) for run in copies), 0,
                        device)
        self.targets = padded([run.y for run in copies], max(len(run.y) for run in copies),
                              0, device)
        self._orders = None

    def epoch(self, orders):
        """This epoch's rows, targets and row mask in each copy's order (copies
        without an order, stopped ones, get no rows), and each copy's row count."""
        if self._orders is not None and all(
                (a is None and b is None) or (a is not None and b is not None
                                              and np.array_equal(a, b))
                for a, b in zip(orders, self._orders)):
            return self._epoch
        n_rows = np.array([0 if order is None else len(order) for order in orders])
        index = np.zeros((len(orders), self.n_slots), dtype=np.int64)
        for copy_index, order in enumerate(orders):
            if order is not None:
                index[copy_index, : len(order)] = order
        index = torch.as_tensor(index, device=self.stack.device)
        copies = torch.arange(len(orders), device=self.stack.device)[:, None]
        mask = torch.as_tensor(np.arange(self.n_slots)[None] < n_rows[:, None],
                               device=self.stack.device)
        targets = self.targets[copies, index]
        if not self.stack.binary:  # rows past a copy's own are ignored by its loss
            targets = torch.where(mask, targets, self.stack.criterion.ignore_index)
        self._orders = orders
        self._epoch = (self.X[copies, index], targets, mask, n_rows)
        return self._epoch

    @torch.no_grad()
    def validation(self, stack, indices):
        """Copies `indices`' validation losses per batch and outputs (as their nets'
        ``validation_step`` gives them, in evaluation mode), by copy."""
        indices = [index for index in indices if self.copies[index].valid is not None]
        if not indices:
            return {}
        sets = [self.copies[index].valid for index in indices]
        n_valid = max(len(y) for _, y in sets)
        sub = _Subset(stack, indices)
        out = sub.forward(Stacked(padded([X for X, _ in sets], n_valid, 0, stack.device)))
        targets = padded([y for _, y in sets], n_valid, 0, stack.device)
        mask = torch.as_tensor(np.arange(n_valid)[None] < np.array(
            [len(y) for _, y in sets])[:, None], device=stack.device)
        if not stack.binary:
            targets = torch.where(mask, targets, stack.criterion.ignore_index)
        losses = []
        for position, index in enumerate(indices):
            run, n = self.copies[index], len(sets[position][1])
            batch = run.minibatch_size(n, run.valid_batch_size)
            slots = -(-n // batch) * batch
            own = slice(0, min(slots, n_valid))
            losses.append(stack.batch_losses(
                _pad_to(out[position : position + 1, own], slots),
                _pad_to(targets[position : position + 1, own], slots,
                        None if stack.binary else stack.criterion.ignore_index),
                _pad_to(mask[position : position + 1, own], slots, False), batch)[0])
        # one transfer for every copy: the callbacks read the losses and the outputs
        # on the host
        out = out.cpu()
        ends = np.cumsum([len(one) for one in losses])
        losses = np.split(torch.cat(losses).cpu().numpy(), ends[:-1])
        return {index: (losses[position], out[position, : len(sets[position][1])])
                for position, index in enumerate(indices)}


def _pad_to(tensor, n_slots, fill=0):
    """`tensor` (one copy, rows on axis 1) padded with `fill` to `n_slots` rows."""
    missing = n_slots - tensor.shape[1]
    if missing <= 0:
        return tensor[:, :n_slots]
    pad = torch.full((tensor.shape[0], missing, *tensor.shape[2:]),
                     0 if fill is None else fill, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, pad], dim=1)


class _Subset:
    """Some copies of a stack, to run forward passes on their weights alone."""

    def __init__(self, stack, indices):
        self.stack = stack
        self.index = torch.as_tensor(indices, device=stack.device)

    def forward(self, X):
        stack = self.stack
        out = stack.forward_pass(
            {name: p[self.index] for name, p in zip(stack.param_names, stack.params)},
            {name: b[self.index] for name, b in zip(stack.buffer_names, stack.buffers)}, X)
        return out.reshape(out.shape[0], out.shape[1]) if stack.binary else out
