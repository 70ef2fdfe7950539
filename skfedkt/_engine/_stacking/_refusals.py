"""What the stacked path serves: skorch nets whose every step it reproduces, and why
it refuses the others (they train one by one, and the tier's record says why)."""

import torch
from skorch import NeuralNetBinaryClassifier, NeuralNetClassifier
from skorch.callbacks import (
    EarlyStopping,
    EpochScoring,
    EpochTimer,
    LRScheduler,
    PassthroughScoring,
    PrintLog,
)
from skorch.dataset import Dataset
from torch import nn
from torch.utils.data import DataLoader

from .._compat import version_of
from .._nets import learner_and_steps
from .._torch_weights import ProximalTerm
from ._forward import BATCH_NORMS
from ._optimizer import OPTIMIZERS

# the oldest torch the stacked path's tests ran on (torch.func, fused CPU Adam and
# SGD, functional Adam's decoupled weight decay)
OLDEST_TORCH = (2, 11)

# the criterion each kind of net computes on the stacked path
_CRITERIA = {NeuralNetClassifier: (nn.CrossEntropyLoss, nn.NLLLoss),
             NeuralNetBinaryClassifier: (nn.BCEWithLogitsLoss,)}

# callbacks that only record what the epoch did (skorch's defaults; FedProx's term,
# which the stack adds itself), and those that act on a copy's training between
# epochs, run for each copy on its own history
_RECORDING = (EpochTimer, PassthroughScoring, EpochScoring, PrintLog, ProximalTerm)
_ACTING = (EarlyStopping, LRScheduler)
# schedulers that change more than the learning rate (momentum, betas)
_UNSERVED_POLICIES = (torch.optim.lr_scheduler.CyclicLR, torch.optim.lr_scheduler.OneCycleLR)


def _name(value):
    return getattr(value, "__name__", type(value).__name__)


def stacking_refusal(estimator):
    """Why clones of `estimator` cannot be trained together as separate fits would
    train them, or None when they can (the module, the optimizer and the callbacks are
    checked once the net is initialised, by `module_refusal`).

    Served: skorch's `NeuralNetClassifier` and `NeuralNetBinaryClassifier` themselves
    (a subclass may change any step), alone or as a Pipeline's last step, with any
    ``train_split``, minibatches in order or shuffled, the cross-entropy, negative
    log-likelihood or (binary) logistic criterion, given as a class or an instance,
    and Adam, AdamW or SGD with one parameter group.
    """
    net, _ = learner_and_steps(estimator)
    kind = type(net)
    if kind not in _CRITERIA:
        return (f"{kind.__name__} is not skorch's NeuralNetClassifier or "
                "NeuralNetBinaryClassifier, whose training steps the stacked path "
                "reproduces")
    if version_of("torch")[:2] < OLDEST_TORCH:
        return (f"torch {torch.__version__}: the stacked path is tested from torch "
                f"{'.'.join(map(str, OLDEST_TORCH))} on")
    if net.optimizer not in OPTIMIZERS:
        return (f"optimizer {_name(net.optimizer)}: the stacked path steps Adam, AdamW "
                "and SGD")
    if "param_groups" in net.get_params_for_optimizer("optimizer", [])[1]:
        return "optimizer__param_groups: the stacked path steps one parameter group"
    criterion = net.criterion if isinstance(net.criterion, type) else type(net.criterion)
    if criterion not in _CRITERIA[kind]:
        return (f"criterion {criterion.__name__}: the stacked path computes "
                f"{' and '.join(c.__name__ for c in _CRITERIA[kind])} for a {kind.__name__}")
    for prefix, options in (("iterator_train", {"batch_size", "shuffle", "drop_last"}),
                            ("iterator_valid", {"batch_size"})):
        if getattr(net, prefix) is not DataLoader or set(net.get_params_for(prefix)) - options:
            return (f"{prefix}: the stacked path draws minibatches as a plain DataLoader "
                    f"with {' and '.join(sorted(options))}")
    if net.dataset is not Dataset:
        return "dataset: the stacked path reads rows as skorch's Dataset"
    if net.compile:
        return "compile=True: the stacked path runs the module uncompiled"
    if net.use_caching is False:
        return "use_caching=False: the scoring callbacks would predict with each net"
    return None


def acts_between_epochs(net):
    """Whether a callback of the initialised `net` acts on its training between
    epochs (stops it, changes its learning rate)."""
    return any(isinstance(callback, _ACTING) for _, callback in net.callbacks_)


def _callback_refusal(net):
    for name, callback in net.callbacks_:
        kind = type(callback)
        if kind is EpochScoring and (callback.on_train or callback.use_caching is False):
            return (f"callback {name}: an EpochScoring on the training rows or without "
                    "caching scores each net's own predictions")
        if kind is LRScheduler and (callback.step_every != "epoch" or issubclass(
                callback.policy_, _UNSERVED_POLICIES)):
            return (f"callback {name}: the stacked path steps learning-rate schedules "
                    "once an epoch, on the learning rate alone")
        if kind not in _RECORDING + _ACTING:
            return (f"callback {name} ({kind.__name__}): it acts on each net's own "
                    "training loop")
    return None


def module_refusal(net):
    """Why an initialised net's module, criterion, optimizer or callbacks cannot be
    stacked, or None."""
    module = net.module_
    for name, part in module.named_modules():
        if isinstance(part, nn.RNNBase):
            return f"module {name or 'itself'} ({type(part).__name__}) loops over sequences"
        if isinstance(part, BATCH_NORMS) and not part.track_running_stats:
            return (f"module {name} ({type(part).__name__}) normalises by batch statistics "
                    "in evaluation too (track_running_stats=False)")
    if len(list(module.named_parameters(remove_duplicate=False))) != len(
            list(module.named_parameters())):
        return "the module shares a parameter between layers"
    criterion = net.criterion_
    if criterion.reduction != "mean":
        return f"criterion reduction={criterion.reduction!r}: the stacked path takes the mean"
    if isinstance(criterion, nn.BCEWithLogitsLoss) and criterion.weight is not None:
        return "criterion weight: the stacked path weighs a binary net's rows alike"
    optimizer = net.optimizer_
    if len(optimizer.param_groups) != 1:
        return "the optimizer has several parameter groups"
    options = {key: value for key, value in optimizer.param_groups[0].items()
               if key != "params"}
    unknown = set(options) - OPTIMIZERS[type(optimizer)]
    if unknown:
        return f"optimizer options {sorted(unknown)} are not reproduced by the stacked path"
    if options.get("maximize") or options.get("differentiable"):
        return "optimizer maximize/differentiable: not reproduced by the stacked path"
    return _callback_refusal(net)
