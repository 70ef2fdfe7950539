"""The rows a stack's copies train and validate on, padded to one shape on the stack's
device, and the criterion's losses on them, each copy's rows weighed as its own net's
criterion weighs them."""

from typing import NamedTuple, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._forward import Stacked


def padded(arrays, n_slots, fill, device, dtype=None):
    """One tensor of shape (len(arrays), n_slots, ...): each array's rows, then `fill`."""
    first = torch.as_tensor(arrays[0])
    out = torch.full((len(arrays), n_slots, *first.shape[1:]), fill,
                     dtype=dtype or first.dtype, device=device)
    for index, array in enumerate(arrays):
        out[index, : len(array)] = torch.as_tensor(array, device=device)
    return out


def _pad_to(tensor, n_slots, fill=0):
    """`tensor` (one copy, rows on axis 1) padded with `fill` to `n_slots` rows."""
    missing = n_slots - tensor.shape[1]
    if missing <= 0:
        return tensor[:, :n_slots]
    pad = torch.full((tensor.shape[0], missing, *tensor.shape[2:]),
                     0 if fill is None else fill, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor, pad], dim=1)


class StackedLoss:
    """A net's criterion over the stacked copies' outputs: the cross-entropy, negative
    log-likelihood or (`binary`) logistic loss of every row, weighed as the criterion's
    mean weighs it, in the weights' `dtype`."""

    def __init__(self, criterion, binary, dtype):
        self.criterion, self.binary, self.dtype = criterion, binary, dtype
        self.nll = isinstance(criterion, nn.NLLLoss)
        # what marks a row no loss counts (a binary net's criterion has no such target)
        self.ignore_index = None if binary else criterion.ignore_index

    def per_row(self, output, targets):
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

    def row_weights(self, targets, mask):
        """What each row counts in its copy's mean loss: 1, or its class's weight; 0
        for a row that pads its copy's minibatch."""
        weight = None if self.binary else self.criterion.weight
        mask = mask.to(self.dtype)
        if weight is None:
            return mask
        return weight[targets.clamp(min=0)] * mask

    def masked_targets(self, targets, mask):
        """`targets` with the rows past a copy's own (`mask` False) ignored by its loss
        (a binary net's loss masks them itself)."""
        if self.ignore_index is None:
            return targets
        return torch.where(mask, targets, self.ignore_index)

    def step_denominators(self, targets, mask, n_steps, batch):
        """What each copy's loss of each step is divided by: its rows' weights in the
        step, (steps, copies); 1 where it has none."""
        totals = self.row_weights(targets, mask).view(len(targets), n_steps, batch).sum(
            dim=2).T
        return torch.where(totals > 0, totals, 1)

    def step_losses(self, output, targets, mask, denominators):
        """Each copy's mean loss over its rows of one step."""
        per_row = self.per_row(output, targets).view(len(output), -1)
        if self.binary:  # the other criteria give an ignored row no loss
            per_row = per_row * mask
        return per_row.sum(dim=1) / denominators

    def batch_losses(self, output, targets, mask, batch):
        """Each copy's mean loss over each of its minibatches of `batch` rows: the
        rows' losses weighed as the criterion's mean weighs them (over that copy's
        minibatch alone), shape (copies, minibatches); 0 where it has none."""
        n_copies = output.shape[0]
        weights = self.row_weights(targets, mask).view(n_copies, -1, batch)
        losses = (self.per_row(output, targets).view(n_copies, -1, batch)
                  * (weights > 0)).sum(dim=2)
        totals = weights.sum(dim=2)
        return losses / torch.where(totals > 0, totals, 1)


class EpochRows(NamedTuple):
    """An epoch's rows of every copy, in its order, padded to one length."""

    X: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    """Whether each slot holds one of its copy's rows."""
    n_rows: np.ndarray
    """Each copy's rows."""


def _same_orders(orders, others):
    """Whether two epochs' orders are the same for every copy (None: no rows)."""
    return all((a is None and b is None)
               or (a is not None and b is not None and np.array_equal(a, b))
               for a, b in zip(orders, others))


class CallData:
    """The copies' rows of one ``partial_fit`` call, padded and on `device`: every row
    for the minibatches, each copy's validation rows; `loss`: their `StackedLoss`."""

    def __init__(self, copies, loss, device):
        self.copies, self.loss, self.device = copies, loss, device
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
        # the last epoch's orders and rows, which the next epoch reuses where its
        # orders are the same
        self._last_epoch: Optional[tuple[list, EpochRows]] = None

    def epoch(self, orders):
        """This epoch's rows, targets and row mask in each copy's order (copies
        without an order, stopped ones, get no rows), and each copy's row count."""
        if self._last_epoch is not None and _same_orders(orders, self._last_epoch[0]):
            return self._last_epoch[1]
        n_rows = np.array([0 if order is None else len(order) for order in orders])
        positions = np.zeros((len(orders), self.n_slots), dtype=np.int64)
        for copy_index, order in enumerate(orders):
            if order is not None:
                positions[copy_index, : len(order)] = order
        index = torch.as_tensor(positions, device=self.device)
        copies = torch.arange(len(orders), device=self.device)[:, None]
        mask = torch.as_tensor(np.arange(self.n_slots)[None] < n_rows[:, None],
                               device=self.device)
        targets = self.loss.masked_targets(self.targets[copies, index], mask)
        rows = EpochRows(self.X[copies, index], targets, mask, n_rows)
        self._last_epoch = (orders, rows)
        return rows

    @torch.no_grad()
    def validation(self, forward, indices):
        """Copies `indices`' validation losses per batch and outputs (as their nets'
        ``validation_step`` gives them, in evaluation mode), by copy; `forward(X,
        copies)`: the outputs of the copies at `copies` (a tensor of indices)."""
        indices = [index for index in indices if self.copies[index].valid is not None]
        if not indices:
            return {}
        sets = [self.copies[index].valid for index in indices]
        n_valid = max(len(y) for _, y in sets)
        out = forward(Stacked(padded([X for X, _ in sets], n_valid, 0, self.device)),
                      torch.as_tensor(indices, device=self.device))
        mask = torch.as_tensor(np.arange(n_valid)[None] < np.array(
            [len(y) for _, y in sets])[:, None], device=self.device)
        targets = self.loss.masked_targets(padded([y for _, y in sets], n_valid, 0,
                                                  self.device), mask)
        losses = []
        for position, index in enumerate(indices):
            run, n = self.copies[index], len(sets[position][1])
            batch = run.minibatch_size(n, run.valid_batch_size)
            slots = -(-n // batch) * batch
            own = slice(0, min(slots, n_valid))
            losses.append(self.loss.batch_losses(
                _pad_to(out[position : position + 1, own], slots),
                _pad_to(targets[position : position + 1, own], slots, self.loss.ignore_index),
                _pad_to(mask[position : position + 1, own], slots, False), batch)[0])
        # one transfer for every copy: the callbacks read the losses and the outputs
        # on the host
        out = out.cpu()
        ends = np.cumsum([len(one) for one in losses])
        by_copy = np.split(torch.cat(losses).cpu().numpy(), ends[:-1])
        return {index: (by_copy[position], out[position, : len(sets[position][1])])
                for position, index in enumerate(indices)}
