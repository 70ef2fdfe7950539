"""Checks of a skorch net against the clones of a tier, made before any of them is
fitted (imported only where a tier holds a torch network)."""

import warnings

import numpy as np
from skorch.dataset import ValidSplit


def _classes_in_words(codes):
    values, counts = np.unique(codes, return_counts=True)
    return ", ".join(f"{value} x {count}" for value, count in zip(values, counts))


def _split_in_words(split):
    if type(split) is ValidSplit:
        options = [repr(split.cv)] + ([] if split.stratified else ["stratified=False"])
        return f"ValidSplit({', '.join(options)})"
    return repr(split)


def _settings_that_work(split, tasks):
    """What would split every clone's rows, in words: fewer folds, or no
    stratification, where skorch's `ValidSplit` with an integer ``cv`` asks too many."""
    if not (type(split) is ValidSplit and isinstance(split.cv, int)):
        return ""
    largest_class = min(np.unique(task.y, return_counts=True)[1].max() for task in tasks)
    smallest = min(len(task.y) for task in tasks)
    if split.stratified and largest_class >= 2:
        return (f", ValidSplit({largest_class}) (the most folds every clone's largest "
                "class allows)")
    if split.stratified and smallest >= split.cv:
        return f", ValidSplit({split.cv}, stratified=False)"
    return ""


def check_validation_splits(net, tasks, tier, targets_of):
    """Refuse, before any fit of the tier, clones whose rows `net`'s own
    ``train_split`` cannot split (skorch's default holds out a stratified fifth, which
    needs 5 rows of a class): the error names the tier, the clones, their rows and
    classes, and the settings that would work. `targets_of(task)`: the targets the
    net would learn. Clones of one class fit a constant model, not the net."""
    if not net.train_split:
        return
    failed = []
    trained = [task for task in tasks if np.unique(task.y).size > 1]
    for task in trained:
        targets = targets_of(task)
        rows = np.zeros((len(targets), 1), dtype=np.float32)
        with warnings.catch_warnings():
            # a split that works may warn of a small class; the fit itself warns again
            warnings.simplefilter("ignore")
            try:
                net.get_split_datasets(rows, targets)
            except ValueError as exc:
                failed.append((task, exc))
    if not failed:
        return
    first, error = failed[0]
    who = first.name or "a clone"
    raise ValueError(
        f"Tier {tier!r}: the skorch net's train_split={_split_in_words(net.train_split)} "
        f"cannot hold out validation rows for {len(failed)} of its {len(trained)} clones "
        f"({str(error).rstrip('.')}). {who[0].upper() + who[1:]} has {len(first.y)} rows, "
        f"of classes (positions in "
        f"classes_) {_classes_in_words(first.y)}. Set the net's train_split=None (skorch "
        f"then trains on all of a clone's rows and validates on none)"
        f"{_settings_that_work(net.train_split, trained)}, or give each clone more rows "
        "(fewer clones per party).")
