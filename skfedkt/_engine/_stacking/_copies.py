"""One copy's own side of the stacked training: what its separate fit would hold out,
draw, record and decide, replayed around the stack's steps.

A skorch fit (``NeuralNet.partial_fit``) splits its rows with its own ``train_split``,
and in every epoch its data loaders draw from torch's global generator (each loader's
base seed, and with ``iterator_train__shuffle=True`` the seed of that epoch's order),
as do its dropout layers in every training step; its callbacks record its history
and may change its learning rate or stop it. A `CopyRun` holds a generator in the
state its copy's global generator would be in, draws from it in that order, and runs
the net's own callbacks at the end of each epoch on the history the stack fills in:
skorch's defaults, `EarlyStopping` and `LRScheduler` act on each copy as on its own
fit (`SERVED_CALLBACKS`).
"""

from typing import Any

import numpy as np
import torch
from skorch import NeuralNetBinaryClassifier, NeuralNetClassifier
from skorch.callbacks import EpochScoring, PassthroughScoring, PrintLog
from skorch.dataset import Dataset
from skorch.utils import to_numpy
from torch.utils.data import Subset

from .._compat import (
    is_best_score,
    mark_optimizer_stepped,
    predict_nonlinearity,
    record_epoch_score,
    skip_log_header,
)
from ._forward import CannotStack


def _is_own_accuracy(callback, net):
    """Whether `callback` is skorch's validation accuracy (`EpochScoring` with
    ``scoring="accuracy"`` on the validation rows, the default ``valid_acc``) of a
    net that predicts by skorch's own rule."""
    base = (NeuralNetBinaryClassifier if isinstance(net, NeuralNetBinaryClassifier)
            else NeuralNetClassifier)
    return (type(callback) is EpochScoring and callback.scoring == "accuracy"
            and not callback.on_train and callback.target_extractor is to_numpy
            and type(net).predict is base.predict
            and type(net).predict_proba is base.predict_proba)


def _record_passthrough(callback, history, score):
    """What skorch's `PassthroughScoring` records of an epoch whose average is `score`:
    the score, and whether it is the best yet."""
    is_best = is_best_score(callback, score)
    if is_best:
        callback.best_score_ = score
    history.record(callback.name, score)
    if is_best is not None:
        history.record(callback.name + "_best", bool(is_best))


def _epoch_batches(losses, n_rows, batch):
    """An epoch's minibatch losses (floats) and their sizes: `batch` rows each, of
    `n_rows`, the last the rest."""
    return ([float(loss) for loss in losses],
            [min(batch, n_rows - index * batch) for index in range(len(losses))])


def _loader_options(net, training):
    """A data loader's batch size, whether it shuffles and whether it drops a last
    short minibatch, as ``net.get_iterator`` would make it."""
    options = net.get_params_for("iterator_train" if training else "iterator_valid")
    return (options.get("batch_size", net.batch_size), bool(options.get("shuffle", False)),
            bool(options.get("drop_last", False)))


def _accuracy(net, valid_output, targets):
    """The share of validation rows (`targets`) `net`'s ``predict`` gets right, from its
    output on them (skorch's rule: the largest probability, or a binary net's
    threshold)."""
    proba = predict_nonlinearity(net)(valid_output).numpy()
    predicted = ((proba[:, 1] > net.threshold).astype("uint8")
                 if isinstance(net, NeuralNetBinaryClassifier) else proba.argmax(axis=1))
    return float(np.mean(predicted == targets))


class CopyRun:
    """What one copy of the stack does outside the stacked steps.

    Parameters
    ----------
    net : skorch.NeuralNet
        The copy's initialised net, which receives its history and runs its callbacks.
    X, y : ndarray
        The rows and targets its ``fit`` gets (after any Pipeline steps before it).
    generator : torch.Generator or None
        A CPU generator in the state the copy's global generator is in after its net
        was initialised; None when its training draws nothing.
    noise_generator : torch.Generator or None
        Where its dropout noise comes from: `generator` on the CPU; on a GPU, its own
        generator there (torch draws dropout masks on the GPU in its own way, which
        cannot be replayed: the noise has the same distribution, not the same bits).
    events : bool
        Whether its history is recorded and its callbacks run (a net that is kept,
        prints, or has callbacks that act on its training).
    """

    def __init__(self, net, X, y, generator, noise_generator, events):
        self.net, self.X, self.y = net, X, y
        self.generator, self.noise_generator = generator, noise_generator
        self.events = events
        self.batch_size, self.shuffle, self.drop_last = _loader_options(net, training=True)
        self.valid_batch_size, *_ = _loader_options(net, training=False)
        self.stopped = False

    def begin_call(self):
        """The start of a ``partial_fit`` call: ``on_train_begin``, then its checks of
        the data (a classifier notes the classes it sees) and its split."""
        if self.events:
            self.net.notify("on_train_begin", X=self.X, y=self.y)
        self.net.check_data(self.X, self.y)
        train, valid = self.net.get_split_datasets(self.X, self.y)
        self.datasets = dict(dataset_train=train, dataset_valid=valid)
        self.train_rows = self._rows_of(train)
        self.valid = None
        if valid is not None:
            base = train.dataset if isinstance(train, Subset) else train
            if isinstance(valid, Subset) and valid.dataset is base:
                rows = np.asarray(valid.indices)
                self.valid = (self.X[rows], self.y[rows])
            elif type(valid) is Dataset and isinstance(valid.X, np.ndarray) and (
                    valid.y is not None):
                self.valid = (valid.X, np.asarray(valid.y))
            else:
                raise CannotStack("train_split returns a validation set that is neither "
                                  "some of the net's rows nor a skorch Dataset of arrays")
        self.stopped = False

    def _rows_of(self, train):
        if isinstance(train, Subset):
            base: Any = train.dataset  # torch's stubs know no skorch Dataset
            if type(base) is Dataset and base.X is self.X:
                return np.asarray(train.indices)
        elif type(train) is Dataset and train.X is self.X:
            return np.arange(len(self.X))
        raise CannotStack("train_split returns a training set that is not the net's rows")

    def epoch_order(self):
        """The rows of this epoch's minibatches, in order: the training loader's draws
        (its base seed, and with shuffling the seed of its order); with ``drop_last``
        without the last short minibatch."""
        order = self.train_rows
        if self.generator is not None:
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
            if self.shuffle:
                seed = int(torch.empty((), dtype=torch.int64).random_(
                    generator=self.generator))
                generator = torch.Generator()
                generator.manual_seed(seed)
                order = order[torch.randperm(len(order), generator=generator).numpy()]
        if self.drop_last:
            order = order[: len(order) - len(order) % self.minibatch_size(len(order))]
        self.n_epoch_rows = len(order)
        return order

    def begin_epoch(self):
        if self.events:
            self.net.notify("on_epoch_begin", **self.datasets)

    def end_epoch(self, train_losses, valid_losses=None, valid_output=None):
        """The end of an epoch: the validation loader's draw, the epoch's batches in
        the history (`train_losses` per minibatch, `valid_losses` per validation
        batch), the validation output for the scoring callbacks, then
        ``on_epoch_end``, which may stop the copy (skorch's `EarlyStopping`)."""
        if self.valid is not None and self.generator is not None:
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        if not self.events:
            return
        if len(train_losses):
            # what the net's own optimizer.step sets once it stepped, which torch's
            # learning-rate schedulers read before they step (else they warn)
            mark_optimizer_stepped(self.net.optimizer_)
        history = self.net.history
        n_train = self.n_epoch_rows
        batches = history[-1]["batches"]
        # each loss's batches by on_train, as skorch's PassthroughScoring reads them back
        recorded = {True: _epoch_batches(train_losses, n_train, self.minibatch_size(n_train))}
        for loss, size in zip(*recorded[True]):
            batches.append({"train_loss": loss, "train_batch_size": size})
        history.record("train_batch_count", len(train_losses))
        if self.valid is not None:
            n_valid = len(self.valid[1])
            recorded[False] = _epoch_batches(
                valid_losses, n_valid, self.minibatch_size(n_valid, self.valid_batch_size))
            for loss, size in zip(*recorded[False]):
                batches.append({"valid_loss": loss, "valid_batch_size": size})
            history.record("valid_batch_count", len(valid_losses))
            device = valid_output.device
            # the scoring callbacks read the validation predictions as they cache them
            self.net.notify("on_batch_end", batch=(
                torch.as_tensor(self.valid[0], device=device),
                torch.as_tensor(self.valid[1], device=device)), training=False,
                y_pred=valid_output, loss=torch.as_tensor(np.mean(valid_losses)))
        try:
            self._notify_epoch_end(valid_output, recorded)
        except KeyboardInterrupt:  # skorch's EarlyStopping ends the fit this way
            self.stopped = True

    def _notify_epoch_end(self, valid_output, recorded):
        """``on_epoch_end``, as the net's ``notify`` sends it, with three of skorch's
        callbacks doing what they would do, at less cost (each costs a millisecond
        per network and epoch, more than the network's step):

        - its own validation accuracy (`_is_own_accuracy`) is scored from the stack's
          output as its scorer would score it, without scikit-learn's checks of every
          call;
        - its ``train_loss`` and ``valid_loss`` (`PassthroughScoring`) average the
          epoch's losses, `recorded` (by ``on_train``: the losses and batch sizes just
          written to the history), without reading the history back;
        - a `PrintLog` that prints nothing (``verbose=0``) tabulates nothing, and notes
          that its header's line is past, as it would.
        """
        net = self.net
        net.on_epoch_end(net, **self.datasets)
        for _, callback in net.callbacks_:
            if (valid_output is not None and self.valid is not None
                    and _is_own_accuracy(callback, net)):
                record_epoch_score(callback, net.history,
                                   _accuracy(net, valid_output, self.valid[1]))
            elif (type(callback) is PassthroughScoring
                  and callback.name == ("train_loss" if callback.on_train else "valid_loss")):
                losses, sizes = recorded.get(callback.on_train, ([], []))
                if losses:  # skorch's records nothing for an epoch without such batches
                    _record_passthrough(callback, net.history,
                                        np.average(losses, weights=sizes))
            elif type(callback) is PrintLog and callback.sink is print and not net.verbose:
                skip_log_header(callback)
            else:
                callback.on_epoch_end(net, **self.datasets)

    def minibatch_size(self, n_rows, batch_size=None):
        """The rows of a minibatch of a loader over `n_rows` rows: its `batch_size`
        (the training loader's by default), or every row for skorch's -1."""
        batch_size = self.batch_size if batch_size is None else batch_size
        return n_rows if batch_size == -1 else batch_size

    def end_call(self):
        if self.events:
            self.net.notify("on_train_end", X=self.X, y=self.y)

    @property
    def learning_rate(self):
        """The rate its optimizer steps with next (its scheduler may have changed it)."""
        return float(self.net.optimizer_.param_groups[0]["lr"])
