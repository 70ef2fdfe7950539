"""Test configuration: one thread per BLAS, OpenMP and torch pool.

Worker threads of OpenMP (HistGradientBoosting, XGBoost) and torch spin while they wait,
so on a busy machine they fight the other work for the cores and a test can take a
hundred times longer than on an idle one. With one thread each the suite slows down in
proportion to the load. Set here, before any test module imports those libraries; the
parallel tests still run their clones in several processes or threads.
"""

import os
import re
import warnings

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


@pytest.fixture(autouse=True)
def no_warning_silenced_for_later_tests():
    """No test leaves a filter behind that silences warnings: one did, and a later test
    missed the warning it expected where pytest's own capture is off (-p no:warnings).
    (Libraries may restore Python's default filters as they start: those show
    warnings.)"""
    before = list(warnings.filters)
    yield
    leaked = [entry for entry in warnings.filters
              if entry not in before and entry[0] == "ignore"]
    assert not leaked, f"the test left warning filters behind: {leaked}"
