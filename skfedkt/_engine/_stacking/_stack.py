"""`NetworkStack`, the training loop of copies of one skorch net's module, stacked:
every copy's next minibatch in one step, its epochs, validation and callbacks, and its
predictions; its rows and losses are in `_stack_data`, its weights in `_stack_weights`."""

from contextlib import contextmanager
from typing import Optional

import numpy as np
import torch
from skorch import NeuralNetBinaryClassifier

from .._compat import predict_nonlinearity
from . import _graphs
from ._forward import BatchRows, Draws, Stacked, StackedForward
from ._optimizer import StackedOptimizer
from ._stack_data import CallData, StackedLoss, padded
from ._stack_weights import StackedWeights


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
    step_limit: Optional[int] = None

    def __init__(self, nets, unfold_convolutions=False, graphs=None):
        first = nets[0]
        self.nets, self.device = nets, torch.device(first.device or "cpu")
        self.binary = isinstance(first, NeuralNetBinaryClassifier)
        self.forward_pass = StackedForward(first.module_, unfold_convolutions, graphs)
        self.weights = StackedWeights(nets, self.device, self.forward_pass.lean_layers)
        self.loss = StackedLoss(first.criterion_, self.binary, self.weights.params[0].dtype)
        # made by the first `train`, once the weights take their gradients' layout
        self.optimizer: Optional[StackedOptimizer] = None
        self._captured: Optional[_graphs.CapturedSteps] = None
        self._torch_optimizer = first.optimizer_
        # each copy's learning rate, as its own optimizer holds it
        self.rates = np.array([float(net.optimizer_.param_groups[0]["lr"]) for net in nets])

    def forward(self, X, training=False, draws=None, rows=None, copies=None):
        """Every copy's output on `X` (a `Stacked` value, each copy its own rows; or
        rows shared by every copy), as its net's ``infer`` gives it: a binary net's
        one column flattened; `copies` (a tensor of indices): those copies' alone."""
        params, buffers = self.weights.by_name(copies)
        out = self.forward_pass(params, buffers, X, training, draws, rows)
        return out.reshape(out.shape[0], out.shape[1]) if self.binary else out

    def train(self, copies, calls, proximal=None):
        """Train every copy as its net's ``partial_fit`` calls would: one call per
        entry of `calls`, of that many epochs (``fit`` is one call of ``max_epochs``).

        Parameters
        ----------
        copies : list of CopyRun
            Each copy's rows, targets, generator and callbacks, in the stack's order.
        calls : list of int
        proximal : (float, list of Tensor), default=None
            FedProx: ``mu`` and the stacked anchor weights (`StackedWeights.anchor`);
            every step's gradient gains ``mu * (w - anchor)``, as `ProximalTerm` adds
            it.
        """
        with _denormals_flushed(self.device):
            self._train(copies, calls, proximal)

    def _train(self, copies, calls, proximal):
        self._captured = None  # a call's full steps, captured (`_replayed`)
        for epochs in calls:
            for index, run in enumerate(copies):
                run.begin_call()  # a scheduler sets its first rate here
                self.rates[index] = run.learning_rate
            data = CallData(copies, self.loss, self.device)
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
                    self.weights.read_from(index, run.net)
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
        denominators = self.loss.step_denominators(targets, mask, n_steps, batch)
        no_loss = torch.zeros(len(copies), device=self.device, dtype=self.loss.dtype)
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
            elif (replayed := self._replayed(inputs, step_rows, batch, proximal)) is not None:
                losses.append(replayed)
            else:
                draws = Draws(generators, step_rows) if self.forward_pass.draws else None
                losses.append(self._step(inputs, proximal, step_rows, draws, active))
        self.weights.freeze()
        return torch.stack(losses).cpu().numpy() if losses else np.zeros((0, len(copies)))

    def _gradients(self, inputs, step_rows, draws=None):
        """Each copy's loss on a step's `inputs`, the gradients of the trained weights
        in their layout, and the optimizer (the first step makes it). `step_rows`:
        each copy's rows in the step, on the host, so that no check waits for the
        device."""
        X, targets, mask, denominators, on = inputs
        trained = self.weights.trained()
        rows = BatchRows(mask, on, step_rows) if self.forward_pass.batch_norms else None
        out = self.forward(Stacked(X), training=True, draws=draws, rows=rows)
        loss = self.loss.step_losses(out, targets, mask, denominators)
        grads = torch.autograd.grad(loss.sum(), trained)
        if self.optimizer is None:
            self.weights.take_gradient_layout(grads)
            trained = self.weights.trained()
            self.optimizer = StackedOptimizer(self._torch_optimizer, trained, self.rates)
        # the fused updates read a gradient in its parameter's layout
        return loss.detach(), [grad if grad.stride() == param.stride()
                               else torch.empty_like(param).copy_(grad)
                               for grad, param in zip(grads, trained)], self.optimizer

    def _step(self, inputs, proximal, step_rows, draws=None, active=None, together=False):
        """One step of the copies with rows in it; each copy's loss. `together`: every
        copy steps as one (`StackedOptimizer.steps_together`) on a full minibatch,
        without draws: device work alone, which `_replayed` records once and replays,
        and which the caller counts."""
        loss, grads, optimizer = self._gradients(inputs, step_rows, draws)
        if proximal is not None:
            grads = _with_proximal_term(grads, self.weights.trained(), proximal, inputs[-1])
        if together:
            optimizer.update_together(grads)
        else:
            optimizer.step(grads, step_rows > 0 if active is None else active)
        return loss

    def _replayed(self, inputs, step_rows, batch, proximal):
        """Each copy's loss of this step replayed as a CUDA graph (`_graphs`), or None
        where it is not one: on a GPU, where every copy takes a full minibatch as one
        (one rate, one step count), with no dropout draw and no layer through
        ``vmap``."""
        optimizer = self.optimizer
        if not (_graphs.CAPTURE_STEPS and self.device.type == "cuda"
                and optimizer is not None and not self.forward_pass.draws
                and not self.forward_pass.vmapped and (step_rows == batch).all()
                and optimizer.steps_together(step_rows > 0)):
            return None
        if self._captured is None:
            full = step_rows.copy()
            self._captured = _graphs.CapturedSteps(
                lambda *inputs: self._step(inputs, proximal, full, together=True))
        # a replayed graph's loss is its static output, which the next replay overwrites
        loss = self._captured(float(self.rates[0]), inputs).clone()
        optimizer.counted(step_rows > 0)
        return loss

    def _end_epoch(self, copies, data, live, losses):
        """Each live copy's validation pass, history and callbacks, which may stop it
        or change its learning rate."""
        valid = data.validation(
            lambda X, subset: self.forward(X, copies=subset),
            [index for index in live if copies[index].events])
        for index in live:
            run = copies[index]
            n_steps = -(-run.n_epoch_rows // run.minibatch_size(len(run.train_rows)))
            if _restores_weights(run.net):
                self.weights.write_to(index, run.net)
            valid_losses, valid_output = valid.get(index, (None, None))
            run.end_epoch(losses[:n_steps, index], valid_losses, valid_output)
            self.rates[index] = run.learning_rate

    @torch.no_grad()
    def predict_proba(self, X, shared=False, block_rows=4096):
        """Every copy's class probabilities, as its net's ``predict_proba`` gives them,
        shape (n_copies, n_rows, n_classes): on the same rows `X` with `shared`, else
        on each copy's own (a list); `block_rows` rows at a time."""
        nonlinearity = predict_nonlinearity(self.nets[0])
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

    def weights_of(self, index):
        """Copy `index`'s state as float64 arrays (`StackedWeights.weights_of`)."""
        return self.weights.weights_of(index)

    def write_back(self, index, net):
        """Copy `index`'s trained weights and optimizer state into `net` (the net whose
        history and callbacks the training ran), as its own ``fit`` leaves them (no
        optimizer state where it never stepped)."""
        self.weights.write_to(index, net)
        if self.optimizer is not None:
            self.weights.write_optimizer_state(net, self.optimizer.state_of(index))


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
