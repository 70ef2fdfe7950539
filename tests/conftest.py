"""Test configuration: one thread per BLAS, OpenMP and torch pool.

Worker threads of OpenMP (HistGradientBoosting, XGBoost) and torch spin while they wait,
so on a busy machine they fight the other work for the cores and a test can take a
hundred times longer than on an idle one. With one thread each the suite slows down in
proportion to the load. Set here, before any test module imports those libraries; the
parallel tests still run their clones in several processes or threads.
"""

import os
import re

import pytest

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

# the longest files first: pytest-xdist hands each worker whole files (setup.cfg), in
# this order, so that no long file starts last and keeps one worker busy alone
LONGEST_FILES = ("test_examples.py", "test_docs.py", "test_benchmarks.py",
                 "test_estimator_checks.py", "test_corpus.py", "test_privacy.py",
                 "test_stacked.py")


def pytest_collection_modifyitems(items):
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# a sentence ending twice ("...once each.. Ask"), where a refusal quotes another's words
DOUBLED_PUNCTUATION = re.compile(r"[^.]\.\.(?:\s|$)|[,;:]\.(?:\s|$)")


@pytest.fixture(autouse=True)
def refusals_read_as_sentences(monkeypatch):
    """Every refusal of an upload raised in a test reads without doubled punctuation."""
    from skfedkt._deployment._archive import UploadError

    init = UploadError.__init__

    def checked(self, message, **kwargs):
        assert not DOUBLED_PUNCTUATION.search(message), message
        init(self, message, **kwargs)

    monkeypatch.setattr(UploadError, "__init__", checked)
