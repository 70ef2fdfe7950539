"""An in-process Flower Grid and what Flower's runtime sets, for tests of the Flower
apps without a SuperLink."""

import pytest

N_PARTIES = 3


def in_process_grid(client):
    """A Flower Grid that delivers every message to `client`, the ClientApp of its
    node, in this process: three SuperNodes, partitions 0 to 2."""
    from flwr.app import Context, RecordDict
    from flwr.serverapp import Grid

    class InProcessGrid(Grid):
        contexts = {
            100 + i: Context(run_id=1, node_id=100 + i, node_config={"partition-id": i},
                             state=RecordDict(), run_config={})
            for i in range(N_PARTIES)
        }
        run = None

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
            replies = (client(m, self.contexts[m.metadata.dst_node_id]) for m in messages)
            return [reply for reply in replies if reply is not None]  # None: no answer

    return InProcessGrid()


def flower_context():
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})


def served_by_flower(estimator, X, y, party, X_public, classes=(0, 1)):
    """The model the Flower apps serve for `estimator`, each party ``party == k`` of
    ``X, y`` a SuperNode of the in-process grid (`in_process_grid`)."""
    from skfedkt.flower import client_app, server_app

    def party_data(context):
        name = int(context.node_config["partition-id"])
        return X[party == name], y[party == name], name

    served = []
    server = server_app(estimator, X_public, N_PARTIES,
                        lambda model, context: served.append(model))
    server(in_process_grid(client_app(estimator, party_data, X_public,
                                      classes=list(classes))), flower_context())
    return served[0]


@pytest.fixture
def flower_task(monkeypatch):
    """What Flower's runtime sets before messages are created, outside its runtime;
    the test that asks for it skips where the flower extra is not installed."""
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)
