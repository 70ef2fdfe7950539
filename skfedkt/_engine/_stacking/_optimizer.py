"""Adam, AdamW and SGD over stacked parameters, each copy with its own state, step
count and learning rate: torch's own functional update applied to the copies that
step, so that a copy whose epoch is over (or that stopped early) is left exactly as
it is."""

from typing import Any, Optional

import numpy as np
import torch
from torch.optim.adam import adam
from torch.optim.sgd import sgd

# the optimizers whose update is elementwise, applied here by torch's own functional
# update to each copy; their options that are neither read nor refused only choose
# an implementation (foreach, fused, capturable)
ADAM_OPTIONS = {"lr", "betas", "eps", "weight_decay", "amsgrad", "decoupled_weight_decay",
                "maximize", "foreach", "capturable", "differentiable", "fused",
                "initial_lr"}
SGD_OPTIONS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize",
               "foreach", "differentiable", "fused", "initial_lr"}
OPTIMIZERS = {torch.optim.Adam: ADAM_OPTIONS, torch.optim.AdamW: ADAM_OPTIONS,
              torch.optim.SGD: SGD_OPTIONS}


def runs(counts, rates, active):
    """``(start, stop)`` of each run of consecutive active copies with equal step
    counts and learning rates: the copies one call of torch's update serves."""
    active = np.asarray(active, dtype=bool)
    breaks = np.ones(len(counts) + 1, dtype=bool)
    breaks[1:-1] = ((counts[1:] != counts[:-1]) | (rates[1:] != rates[:-1])
                    | (active[1:] != active[:-1]))
    edges = np.flatnonzero(breaks)
    return [(int(start), int(stop)) for start, stop in zip(edges[:-1], edges[1:])
            if active[start]]


def memory_order(tensor):
    """The axes of `tensor` in the order its memory holds them, the copies' axis
    first: a weight stored in its gradient's transposed layout is contiguous in that
    order, and torch's fused update runs twice as fast on contiguous tensors."""
    order = sorted(range(tensor.dim()), key=lambda axis: -tensor.stride(axis))
    if order[0] != 0 or not tensor.permute(order).is_contiguous():
        return list(range(tensor.dim()))
    return order


class StackedOptimizer:
    """Adam (AdamW) or SGD over stacked parameters, as `optimizer` (a copy's own, one
    parameter group) steps each copy's, copy ``i`` at the learning rate ``rates[i]``.

    The copies that step with the same count and learning rate are updated as runs of
    consecutive copies, each a slice of the stacked tensors: one run when all step
    together, a few when the copies are ordered by their number of minibatches."""

    def __init__(self, optimizer, params, rates):
        group = optimizer.param_groups[0]
        # the group's options: numbers, flags and pairs (Adam's betas)
        self.options: dict[str, Any] = {key: (float(value) if torch.is_tensor(value) else value)
                        for key, value in group.items() if key != "params"}
        self.adam = isinstance(optimizer, torch.optim.Adam)
        n_copies = len(params[0])
        # every tensor of a weight (gradient, moments) shares its layout: the update
        # gets each in memory order, the weights' and moments' views made once
        self.orders = [memory_order(param) for param in params]
        self.params = [param.detach().permute(order)
                       for param, order in zip(params, self.orders)]
        self.counts = np.zeros(n_copies, dtype=np.int64)
        # each copy's learning rate, which its scheduler may change between epochs
        self.rates = rates
        self.fused = (params[0].device.type in ("cpu", "cuda")
                      and params[0].dtype in (torch.float32, torch.float64))
        # fused updates keep their step counts where the parameters are
        self.step_device = params[0].device if self.fused else torch.device("cpu")
        # while every copy steps every time: the count of every copy, which torch's
        # update advances itself
        self.in_step: Optional[list[torch.Tensor]] = list(torch.zeros(len(params), device=self.step_device).unbind(0))
        if self.adam:
            self.moments = [[torch.zeros_like(p) for p in self.params] for _ in range(2)]
            self.max_moments = ([torch.zeros_like(p) for p in self.params]
                                if self.options["amsgrad"] else [])
        else:
            # SGD keeps a buffer only with momentum, which torch's update makes at the
            # first step (every copy takes it: each holds a row)
            self.momentum_buffers = [None] * len(params)

    def steps_together(self, active):
        """Whether the copies where `active` (bool per copy) step as one: all of them,
        with one step count and one learning rate (`update_together`)."""
        return (self.in_step is not None and active.all()
                and (self.rates == self.rates[0]).all())

    @torch.no_grad()
    def update_together(self, grads):
        """Every copy's update when they step as one (`steps_together`): device work
        alone, which a CUDA graph can capture; `counted` records it."""
        self._update(grads, 0, len(self.counts), self.in_step)

    def counted(self, active):
        """Record a step of the copies where `active`."""
        if active.all():
            self.counts += 1
        else:
            self.counts[active] += 1

    @torch.no_grad()
    def step(self, grads, active):
        """One step of the copies where `active` (bool per copy) with their `grads`
        (in their weights' layout)."""
        if self.steps_together(active):
            self.update_together(grads)
        else:
            self.in_step = None  # the copies' counts part: one run of counts each call
            for start, stop in runs(self.counts, self.rates, active):
                self._update(grads, start, stop)
        self.counted(active)

    def _update(self, grads, start, stop, steps=None):
        whole = (start, stop) == (0, len(self.counts))

        def views(ordered):
            return ordered if whole else [tensor[start:stop] for tensor in ordered]

        grads = [grad.permute(order) for grad, order in zip(grads, self.orders)]
        if steps is None:  # the update adds one to each count before using it
            steps = list(torch.full((len(grads),), float(self.counts[start]),
                                    device=self.step_device).unbind(0))
        o, lr = self.options, float(self.rates[start])
        params = self.params
        if self.adam:
            adam(views(params), views(grads), views(self.moments[0]),
                 views(self.moments[1]), views(self.max_moments), steps, foreach=False,
                 fused=self.fused, amsgrad=o["amsgrad"], beta1=o["betas"][0],
                 beta2=o["betas"][1], lr=lr, weight_decay=o["weight_decay"], eps=o["eps"],
                 maximize=False, decoupled_weight_decay=o.get("decoupled_weight_decay",
                                                                 False))
            return
        first = bool(o["momentum"]) and self.momentum_buffers[0] is None
        if first and not whole:
            raise RuntimeError("a stacked SGD's first step must be every copy's")
        buffers = (views(self.momentum_buffers) if o["momentum"] and not first
                   else [None] * len(params))
        sgd(views(params), views(grads), buffers, foreach=False, fused=self.fused,
            weight_decay=o["weight_decay"], momentum=o["momentum"], lr=lr,
            dampening=o["dampening"], nesterov=o["nesterov"], maximize=False)
        if first:
            self.momentum_buffers = buffers

    def state_of(self, copy_index):
        """Copy `copy_index`'s optimizer state per parameter, as torch's optimizer
        keeps it after the same steps."""
        if self.adam:
            names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if self.max_moments else [])
            tensors = [*self.moments, *([self.max_moments] if self.max_moments else [])]
            step = torch.tensor(float(self.counts[copy_index]), device=self.step_device)
            return [dict(step=step.clone(), **{name: self._own(kind[i], i)[copy_index].clone()
                                               for name, kind in zip(names, tensors)})
                    for i in range(len(self.moments[0]))]
        return [{"momentum_buffer": None if buffer is None
                 else self._own(buffer, i)[copy_index].clone()}
                for i, buffer in enumerate(self.momentum_buffers)]

    def _own(self, ordered, index):
        """A state tensor of weight `index`, held in memory order, in the weight's own
        axes."""
        return ordered.permute(np.argsort(self.orders[index]).tolist())
