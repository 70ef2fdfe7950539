"""The Flower grid of the tests, from the algorithm author's toolkit, and the fixture
that sets what Flower's runtime sets."""

import pytest

from skfedkt.algorithm import (  # noqa: F401  (the tests import them from here)
    flower_context,
    flower_task_identity,
    in_process_grid,
    served_by_flower,
)
from skfedkt._testing import N_PARTIES  # noqa: F401


@pytest.fixture
def flower_task():
    """What Flower's runtime sets before messages are created, outside its runtime;
    the test that asks for it skips where the flower extra is not installed."""
    pytest.importorskip("flwr")
    with flower_task_identity():
        yield
