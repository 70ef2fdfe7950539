"""What an algorithm's tests need of skfedkt's deployments: the Flower apps run in one
process on an in-process grid, outside Flower's runtime (needs the flower extra)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

# the SuperNodes of `in_process_grid`, partitions 0 to N_PARTIES - 1
N_PARTIES = 3


def in_process_grid(client: Callable[[Any, Any], Any], n_parties: int = N_PARTIES) -> Any:
    """A Flower Grid that delivers every message to `client`, the ClientApp of its
    node, in this process: `n_parties` SuperNodes (three by default), partitions 0 on.
    A `client` that returns None for a message does not answer it."""
    from flwr.app import Context, RecordDict
    from flwr.serverapp import Grid

    class InProcessGrid(Grid):
        contexts = {
            100 + i: Context(run_id=1, node_id=100 + i, node_config={"partition-id": i},
                             state=RecordDict(), run_config={})
            for i in range(n_parties)
        }
        run = None  # type: ignore[assignment]  # no run: the apps read none

        def set_run(self, run_id):
            pass

        def create_message(self, *args, **kwargs):
            raise NotImplementedError

        def get_node_ids(self):
            return list(self.contexts)

        def push_messages(self, messages):
            raise NotImplementedError

        def pull_messages(self, message_ids):
            raise NotImplementedError

        def send_and_receive(self, messages, *, timeout=None):
            replies = []
            for message in messages:
                # a message's id is set when it is sent, as Flower's own grids set it
                message.metadata.__dict__["_message_id"] = message.object_id
                replies.append(client(message, self.contexts[message.metadata.dst_node_id]))
            return [reply for reply in replies if reply is not None]  # None: no answer

    return InProcessGrid()


def flower_context() -> Any:
    """The Flower `Context` of a ServerApp run outside Flower's runtime."""
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})


@contextmanager
def flower_task_identity() -> Iterator[None]:
    """What Flower's runtime sets before messages are created, set within and restored
    on exit, outside its runtime (an older Flower sets none: nothing to do)."""
    try:
        from flwr.supercore.task_identity import TaskIdentity
    except ModuleNotFoundError:
        yield
        return

    # Flower's private task identity: the one thing its runtime sets that messages read
    values: dict[str, Any] = {"_run_id": 1, "_node_id": 0, "_task_id": 1}
    saved: dict[str, Any] = {name: vars(TaskIdentity).get(name) for name in values}
    for name, value in values.items():
        setattr(TaskIdentity, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(TaskIdentity, name, value)


def served_by_flower(estimator: Any, X: Any, y: Any, party: np.ndarray, X_public: Any,
                     classes: Any = (0, 1)) -> Any:
    """The model the Flower apps serve for `estimator`, each party ``party == k`` of
    ``X, y`` (k in 0 to 2) a SuperNode of the in-process grid (`in_process_grid`),
    run within `flower_task_identity`."""
    from .flower import client_app, server_app

    def party_data(context):
        name = int(context.node_config["partition-id"])
        return X[party == name], y[party == name], name

    served = []
    server = server_app(estimator, X_public, N_PARTIES,
                        lambda model, context: served.append(model))
    with flower_task_identity():
        server(in_process_grid(client_app(estimator, party_data, X_public,
                                          classes=list(classes))), flower_context())
    return served[0]
