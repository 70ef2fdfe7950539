"""load_federated, the local-file loaders and the SOLO baseline."""

import gzip

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import dump_svmlight_file, load_wine
from sklearn.tree import DecisionTreeClassifier

from skfedkt.baselines import solo_scores
from skfedkt.datasets import DATASETS, load_federated, load_local_file


@pytest.mark.parametrize("name", ["digits", "breast_cancer", "wine", "iris", "synthetic"])
def test_bundled_datasets_follow_the_paper_protocol(name):
    data = load_federated(name, n_parties=4, min_party_size=5, n_samples=400,
                          random_state=0)
    n_total = len(data.y_train) + len(data.X_public) + len(data.y_test)
    # 75% / 12.5% / 12.5%
    assert abs(len(data.y_train) / n_total - 0.75) < 0.01
    assert abs(len(data.X_public) / n_total - 0.125) < 0.01
    assert data.groups.shape == data.y_train.shape
    assert_array_equal(np.unique(data.groups), np.arange(4))
    assert set(np.unique(data.y_test)) <= set(np.unique(data.y_train))
    assert "y_public" not in data  # the public set comes without labels


def test_splits_and_partitions_are_seeded():
    first = load_federated("wine", n_parties=3, min_party_size=5, random_state=1)
    again = load_federated("wine", n_parties=3, min_party_size=5, random_state=1)
    other = load_federated("wine", n_parties=3, min_party_size=5, random_state=2)
    assert_array_equal(first.X_public, again.X_public)
    assert_array_equal(first.groups, again.groups)
    assert not np.array_equal(first.X_public, other.X_public)


def test_iid_partition_and_custom_fractions():
    data = load_federated("digits", n_parties=7, partition="iid", public_fraction=0.3,
                          test_fraction=0.2, random_state=0)
    sizes = np.bincount(data.groups)
    assert sizes.max() - sizes.min() <= 1
    assert abs(len(data.X_public) / 1797 - 0.3) < 0.01


def test_synthetic_size_options():
    data = load_federated("synthetic", n_samples=800, n_features=7, n_classes=3,
                          n_parties=2, random_state=0)
    assert data.X_train.shape[1] == 7 and len(np.unique(data.y_train)) == 3
    assert len(data.y_train) + len(data.X_public) + len(data.y_test) == 800


@pytest.mark.parametrize("name", ["adult", "cod-rna", "covtype"])
def test_real_datasets_read_local_libsvm_files(tmp_path, name):
    X, y = load_wine(return_X_y=True)
    path = tmp_path / f"{name}.libsvm"
    dump_svmlight_file(X, y, str(path))
    data = load_federated(name, path=path, n_parties=3, min_party_size=5, random_state=0)
    assert data.X_train.shape[1] == 13
    assert isinstance(data.X_train, np.ndarray)  # densified for every estimator
    assert data.name == name


def test_local_csv_with_and_without_header(tmp_path):
    X, y = load_wine(return_X_y=True)
    table = np.column_stack([X, y])
    plain, headed = tmp_path / "plain.csv", tmp_path / "headed.csv"
    np.savetxt(plain, table, delimiter=",")
    np.savetxt(headed, table, delimiter=",", header=",".join(["f"] * 13 + ["label"]),
               comments="")
    for path in (plain, headed):
        X_read, y_read = load_local_file(path)
        np.testing.assert_allclose(X_read, X)
        assert_array_equal(y_read, y)


CENSUS_ROWS = """|1x3 Cross validator
39, State-gov, 77516, <=50K
50, Self-emp-not-inc, 83311, <=50K

38, ?, 215646, >50K
53, Private, 234721, >50K
"""


def test_local_csv_with_text_columns_missing_values_and_a_title_line(tmp_path):
    # UCI's census files: no .csv suffix, a title line, text columns, "?" for missing
    path = tmp_path / "adult.test"
    path.write_text(CENSUS_ROWS)
    X, y = load_local_file(path, text_features="ordinal")
    assert_array_equal(y, ["<=50K", "<=50K", ">50K", ">50K"])
    np.testing.assert_array_equal(X[:, 0], [39, 50, 38, 53])
    # codes in sorted order of the values; the missing value stays missing
    np.testing.assert_array_equal(X[:, 1], [2, 1, np.nan, 0])
    with pytest.raises(ValueError, match=r"Column 1 of .* holds text \(e.g. 'State-gov'\)"):
        load_local_file(path)  # one party's codes would not match another's
    with pytest.raises(ValueError, match="text_features must be 'error' or 'ordinal'"):
        load_local_file(path, text_features="onehot")


def test_load_federated_codes_text_columns_of_a_whole_dataset(tmp_path):
    rng = np.random.RandomState(0)
    jobs = np.array(["Private", "State-gov", "?"])[rng.randint(3, size=200)]
    labels = np.where(rng.rand(200) < 0.3, ">50K", "<=50K")
    path = tmp_path / "adult.data"
    path.write_text("".join(f"{age}, {job}, {label}\n"
                            for age, job, label in zip(rng.randint(18, 90, 200), jobs, labels)))
    data = load_federated("adult", path=path, n_parties=4, min_party_size=5, random_state=0)
    assert data.X_train.shape[1] == 2
    assert set(np.unique(data.X_train[:, 1][~np.isnan(data.X_train[:, 1])])) <= {0, 1}
    assert set(data.y_train) == {"<=50K", ">50K"}


def test_local_csv_with_ragged_rows_or_missing_labels_names_the_row(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("1,2,0\n3,4\n")
    with pytest.raises(ValueError, match="Data row 2 of .* has 2 fields, the first has 3"):
        load_local_file(path)
    path.write_text("1,2,0\n3,4,?\n5,6,1\n")
    with pytest.raises(ValueError, match=r"Data row 2 of .* has no label \('\?' in the last "
                                         r"column; unlabelled rows: 1\): drop them"):
        load_local_file(path)


def test_real_datasets_fetch_openml_without_a_path(monkeypatch):
    calls = []

    def fake_fetch_openml(*, data_id, return_X_y, as_frame):
        calls.append(data_id)
        return load_wine(return_X_y=True)

    monkeypatch.setattr("skfedkt.datasets._loaders.fetch_openml", fake_fetch_openml)
    load_federated("covtype", n_parties=2, min_party_size=5, random_state=0)
    assert calls == [1596]


def test_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No data file"):
        load_federated("adult", path=tmp_path / "missing.libsvm")
    with pytest.raises(ValueError, match="path is for the real datasets"):
        load_federated("iris", path=tmp_path / "x.csv")
    with pytest.raises(ValueError, match="leaves no training rows"):
        load_federated("iris", public_fraction=0.6, test_fraction=0.5)
    with pytest.raises(ValueError, match="Cannot split 112 training rows of 'iris'"):
        load_federated("iris", n_parties=500)
    with pytest.raises(ValueError, match="name"):
        load_federated("imagenet")
    assert "imagenet" not in DATASETS and "mnist" in DATASETS


def test_solo_scores_train_each_party_alone():
    X, y = load_wine(return_X_y=True)
    party = np.repeat([0, 1, 2], [59, 71, 48])  # wine is sorted by class: pure parties
    scores = solo_scores(DecisionTreeClassifier(), X, y, party, X, y)
    # a party that saw one class predicts it everywhere: its share of the test rows
    assert_array_equal(scores, np.bincount(y) / len(y))
    mixed = np.arange(len(y)) % 3
    assert (solo_scores(DecisionTreeClassifier(), X, y, mixed, X, y) > 0.8).all()



# --- the paper's image datasets, from tiny files in their distributed formats -----------


def _idx(array, magic):
    header = magic.to_bytes(4, "big") + b"".join(
        n.to_bytes(4, "big") for n in array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_mnist(folder, n_train=45, n_test=15, compress=False):
    rng = np.random.RandomState(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        for kind, array, magic in (
            ("images-idx3-ubyte", rng.randint(0, 256, (n, 28, 28)), 0x0803),
            ("labels-idx1-ubyte", np.arange(n) % 3, 0x0801),
        ):
            data = _idx(array, magic)
            path = folder / f"{prefix}-{kind}"
            if compress:
                path.with_name(path.name + ".gz").write_bytes(gzip.compress(data))
            else:
                path.write_bytes(data)


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_is_read_from_its_idx_files(tmp_path, compress):
    _write_mnist(tmp_path, compress=compress)
    data = load_federated("mnist", path=tmp_path, n_parties=2, min_party_size=1,
                          random_state=0)
    assert data.X_train.shape[1] == 784 and data.X_train.dtype == np.float32
    assert 0 <= data.X_train.min() and data.X_train.max() <= 1
    total = len(data.X_train) + len(data.X_public) + len(data.X_test)
    assert total == 60


def test_a_malformed_idx_file_is_named(tmp_path):
    _write_mnist(tmp_path)
    labels = tmp_path / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-3])  # the header announces 15 labels
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte.*does not match"):
        load_federated("mnist", path=tmp_path, n_parties=2, min_party_size=1)
    (tmp_path / "train-images-idx3-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="No train-images-idx3-ubyte"):
        load_federated("mnist", path=tmp_path, n_parties=2, min_party_size=1)


def test_svhn_is_read_from_its_matlab_files(tmp_path):
    from scipy.io import savemat

    rng = np.random.RandomState(0)
    for name, n in (("train_32x32.mat", 24), ("test_32x32.mat", 16)):
        savemat(tmp_path / name, {"X": rng.randint(0, 256, (32, 32, 3, n)).astype(np.uint8),
                                  "y": (np.arange(n) % 10 + 1)[:, None]})
    from skfedkt.datasets._images import load_svhn

    X, y = load_svhn(tmp_path)
    assert X.shape == (40, 32 * 32 * 3) and set(y) == set(range(10))  # label 10 is 0
    savemat(tmp_path / "test_32x32.mat", {"X": np.zeros((8, 8, 3, 2), np.uint8),
                                          "y": np.ones((2, 1))})
    with pytest.raises(ValueError, match="test_32x32.mat does not hold SVHN"):
        load_svhn(tmp_path)


def test_cifar10_is_read_from_its_binary_batches(tmp_path):
    from skfedkt.datasets._images import CIFAR10_FILES, load_cifar10

    image = np.zeros((3, 32, 32), np.uint8)
    image[0] = 255  # a red image: channels last, the first is 1 after scaling
    for name in CIFAR10_FILES:
        records = [np.concatenate([[label], image.ravel()]) for label in (3, 7)]
        (tmp_path / name).write_bytes(np.array(records, np.uint8).tobytes())
    X, y = load_cifar10(tmp_path)
    assert X.shape == (12, 3072) and list(y[:2]) == [3, 7]
    assert_array_equal(X[0].reshape(32, 32, 3)[0, 0], [1.0, 0.0, 0.0])
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="test_batch.bin is not a CIFAR-10 binary batch"):
        load_cifar10(tmp_path)


def test_image_datasets_take_a_folder_and_others_refuse_it(tmp_path):
    with pytest.raises(ValueError, match="path is for the real datasets"):
        load_federated("digits", path=tmp_path)


def _own_file(tmp_path, header=True):
    """A CSV of one's own: two features, the party's name, the label last."""
    rng = np.random.RandomState(0)
    hospitals = np.array(["north", "south", "east"])[rng.randint(3, size=120)]
    labels = np.where(rng.rand(120) < 0.4, "sick", "well")
    path = tmp_path / "own.csv"
    path.write_text(("age,dose,hospital,outcome\n" if header else "") + "".join(
        f"{age},{dose:.2f},{hospital},{label}\n" for age, dose, hospital, label in zip(
            rng.randint(18, 90, 120), rng.rand(120), hospitals, labels)))
    return path, hospitals


def test_a_file_of_ones_own_keeps_the_parties_its_column_names(tmp_path):
    path, hospitals = _own_file(tmp_path)
    data = load_federated("file", path=path, party_column="hospital", random_state=0)
    # the party column is no feature; the training rows keep their hospitals
    assert data.X_train.shape[1] == 2 and set(data.groups) == {"north", "south", "east"}
    n_public, n_test = len(data.X_public), len(data.X_test)
    assert len(data.groups) + n_public + n_test == 120
    assert set(data.y_train) == {"sick", "well"}
    # without the column, the rows are split into parties at random, the column coded
    data = load_federated("file", path=path, n_parties=3, min_party_size=5, random_state=0)
    assert data.X_train.shape[1] == 3 and set(data.groups) == {0, 1, 2}


def test_a_file_of_ones_own_is_refused_naming_what_to_pass(tmp_path):
    path, _ = _own_file(tmp_path)
    with pytest.raises(ValueError, match="name='file' reads a CSV or LIBSVM file of your "
                       "own: pass its path"):
        load_federated("file")
    with pytest.raises(ValueError, match=r"party_column='ward' is not a feature column of "
                       r".*; its header names \['age', 'dose', 'hospital'\]"):
        load_federated("file", path=path, party_column="ward")
    with pytest.raises(ValueError, match="party_column names a column of your own file"):
        load_federated("wine", party_column="hospital")
    headless, _ = _own_file(tmp_path / "..", header=False)
    with pytest.raises(ValueError, match="has none: add a header line"):
        load_federated("file", path=headless, party_column="hospital")
    path.write_text(path.read_text().replace(",north,", ",?,", 1))
    with pytest.raises(ValueError, match="has no party in column 'hospital'"):
        load_federated("file", path=path, party_column="hospital")
