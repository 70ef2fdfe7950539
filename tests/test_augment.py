"""Jittered copies of the public rows (FedKT's min_public_rows): what they are made of,
and which tier learns them at each privacy level."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from _data import noise_at
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier

from skfedkt import FedKTClassifier, SoftVotes
from skfedkt._engine._augment import JITTER_SCALE, jittered_rows


class RowCountingTree(DecisionTreeClassifier):
    """A decision tree that remembers how many rows, and which, it was fit on."""

    def fit(self, X, y, sample_weight=None, check_input=True):
        self.fit_rows_ = np.asarray(X).copy()
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


def test_copies_jitter_numbers_keep_integers_and_copy_the_rest():
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.normal(size=50), rng.randint(0, 5, 50), np.full(50, 7.0)])
    X[3, 0] = np.nan
    rows = jittered_rows(X, 200, random_state=0)
    assert rows.shape == (150, 3)
    source = X[np.resize(np.arange(50), 150)]
    # every row in turn, the continuous column moved by about JITTER_SCALE of its spread
    moved = (rows[:, 0] - source[:, 0])[~np.isnan(source[:, 0])]
    assert np.std(moved) == pytest.approx(JITTER_SCALE * np.nanstd(X[:, 0]), rel=0.2)
    assert np.isnan(rows[np.isnan(source[:, 0]), 0]).all()
    assert set(np.unique(rows[:, 1])) <= set(range(5))  # integers within their range
    assert (rows[:, 2] == 7).all()  # a constant column stays constant
    assert (rows[:, 1] != source[:, 1]).any()


def test_frames_keep_their_columns_and_text_is_copied():
    frame = pd.DataFrame({"age": np.arange(20.0), "city": ["a", "b"] * 10,
                          "n": np.arange(20, dtype=np.int64)})
    rows = jittered_rows(frame, 50, random_state=0)
    assert list(rows.columns) == ["age", "city", "n"]
    assert rows.dtypes.equals(frame.dtypes)
    assert (rows["city"].to_numpy() == np.resize(frame["city"].to_numpy(), 30)).all()


def test_nothing_to_add_or_a_sparse_set_gives_no_rows():
    X = np.ones((10, 2))
    assert jittered_rows(X, 10, random_state=0) is None
    assert jittered_rows(sp.csr_matrix(X), 100, random_state=0) is None
    assert jittered_rows(X.astype(np.float32), 20, random_state=0).dtype == np.float32


@pytest.fixture(scope="module")
def federation():
    X, y = make_classification(n_samples=400, n_features=5, random_state=0)
    return X[:300], y[:300], np.arange(300) % 3, X[300:]


@pytest.mark.parametrize("level, students_rows, final_rows", [
    # at L0 there are no queries: the server labels the 100 public rows and 150 copies
    ("L0", 250, 250),
    # the noisy tier learns its queries only: L1's final model, L2's students
    ("L1", 250, 50),
    ("L2", 50, 250),
])
def test_the_tiers_without_noise_learn_the_copies(federation, level, students_rows,
                                                  final_rows):
    X, y, party, X_public = federation
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3),
                          student_estimator=RowCountingTree(max_depth=3),
                          final_estimator=RowCountingTree(max_depth=3),
                          voting=SoftVotes(min_public_rows=250), soft_labels=None,
                          privacy=noise_at(level, query_fraction=0.5, gamma=1.0), n_teachers=2,
                          random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    students = [s for party_students in clf.students_ for s in party_students
                if isinstance(s, RowCountingTree)]
    assert {len(s.fit_rows_) for s in students} == {students_rows}
    assert len(clf.final_estimator_.fit_rows_) == final_rows
    # the copies follow the public rows, which come first
    learned = students[0].fit_rows_ if level != "L2" else clf.final_estimator_.fit_rows_
    assert np.allclose(learned[:100], X_public)
    assert not np.isin(learned[100:, 0], X_public[:, 0]).any()
    assert clf.vote_counts_.shape == (100, 2) and clf.public_mask_.shape == (100,)


def test_hard_votes_label_the_public_rows_alone_as_the_paper(federation):
    X, y, party, X_public = federation
    clf = FedKTClassifier(DecisionTreeClassifier(), final_estimator=RowCountingTree(),
                          voting="hard", n_teachers=2, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    assert len(clf.final_estimator_.fit_rows_) <= len(X_public)
