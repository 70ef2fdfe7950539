"""The plans of algorithms in which every party keeps a model of its own, round after
round (FedCT, DS-FL): which estimator each party fits, given as one estimator, a list
aligned with the sorted parties or a dict keyed by party, and which one model learns
the federation's labels of the public set where the final model is distilled."""

from __future__ import annotations

from typing import Any

from sklearn.tree import DecisionTreeClassifier

from ._compat import InvalidParameterError


class PartyModels:
    """What a plan whose parties each fit their own model holds and answers: its
    ``estimator`` entries (`base_estimators`), each party's estimator in `fit` and on
    its own machine."""

    estimator: Any

    def party_estimators(self, parties: list[Any]) -> list[Any]:
        """One (unfitted) estimator per party of `parties` (the sorted party labels)."""
        if isinstance(self.estimator, dict):
            missing = [p for p in parties if p not in self.estimator]
            unknown = [p for p in self.estimator if p not in parties]
            if missing or unknown:
                raise ValueError(
                    "estimator must have one entry per party of groups: "
                    f"missing {missing}, unknown {unknown}; parties are {parties}."
                )
            return [self.estimator[p] for p in parties]
        if isinstance(self.estimator, list):
            if len(self.estimator) != len(parties):
                raise ValueError(
                    f"estimator is a list of {len(self.estimator)} estimators but groups "
                    f"has {len(parties)} parties; give one per party, in the order "
                    f"of the sorted party labels {parties}."
                )
            return self.estimator
        return base_estimators(self.estimator) * len(parties)

    def own_estimator(self, party: Any) -> Any:
        """The estimator of `party` on its own machine, which knows only its name."""
        if isinstance(self.estimator, list):
            raise ValueError(
                "A list estimator is aligned with the sorted party labels, which a party "
                "does not know: give a dict keyed by party name to fit_party."
            )
        if isinstance(self.estimator, dict):
            if party not in self.estimator:
                raise ValueError(
                    f"estimator has no entry for party {party!r}; its keys are "
                    f"{list(self.estimator)}."
                )
            return self.estimator[party]
        return base_estimators(self.estimator)[0]

    def uploaded_estimators(self, party: Any) -> list[Any]:
        return [self.own_estimator(party)]


def base_estimators(estimator: Any) -> list[Any]:
    """The estimators of an `estimator` parameter of one estimator, a list or a dict:
    a decision tree by default."""
    if estimator is None:
        return [DecisionTreeClassifier()]
    if isinstance(estimator, dict):
        return list(estimator.values())
    if isinstance(estimator, list):
        return estimator
    return [estimator]


def checked_entries(estimator: Any) -> Any:
    """`estimator`'s ``estimator`` parameter, refused (naming the entry) where a list or
    dict holds anything but estimators with fit and predict."""
    entries = estimator.estimator
    if isinstance(entries, (list, dict)):
        for key, entry in (entries.items() if isinstance(entries, dict)
                           else enumerate(entries)):
            if not (hasattr(entry, "fit") and hasattr(entry, "predict")):
                raise InvalidParameterError(
                    f"The 'estimator' parameter of {type(estimator).__name__} must "
                    f"hold estimators with fit and predict; entry {key!r} is {entry!r} "
                    f"of type {type(entry).__name__}."
                )
    return entries


def final_of(estimator: Any, learned: str) -> Any:
    """The final model of an estimator that distils (None where it does not): its
    `final_estimator`, or its one base estimator; refused, naming the parameter, where
    there is nothing `learned` (the last round's consensus, say) or no one estimator to
    learn it with."""
    if not estimator.distill:
        return None
    if estimator.n_rounds == 0:
        raise ValueError(f"distill=True fits a model on {learned} of the public rows, "
                         "and n_rounds=0 makes none: set n_rounds to 1 or more, or "
                         "distill=False.")
    if estimator.final_estimator is not None:
        return estimator.final_estimator
    if isinstance(estimator.estimator, (list, dict)):
        raise ValueError("distill=True with a list or dict estimator (one kind of model "
                         "per party) needs the final model's kind: pass final_estimator.")
    return base_estimators(estimator.estimator)[0]
