"""The FedKT paper's image datasets from their distributed files: MNIST (IDX), SVHN
(MATLAB ``*_32x32.mat``) and CIFAR-10 (the binary version). Nothing is unpickled: the
python version of CIFAR-10 is a pickle, so only its binary version is read.

Each loader reads the training and the test files of a folder and returns all their
rows, pixels scaled to [0, 1] and flattened (channels last, as ``X.reshape(-1, 28, 28)``
or ``X.reshape(-1, 32, 32, 3)`` gives back the images), labels as integers.
"""

import gzip
from pathlib import Path

import numpy as np
from scipy.io import loadmat

# IDX files: magic number of unsigned bytes with 1 or 3 dimensions
_IDX_LABELS, _IDX_IMAGES = 0x0801, 0x0803
CIFAR10_FILES = [*(f"data_batch_{i}.bin" for i in range(1, 6)), "test_batch.bin"]
_CIFAR10_RECORD = 1 + 32 * 32 * 3


def _find(folder, names):
    """The first of `names` (each also gzipped) that exists in `folder`."""
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(
        f"No {names[0]} (or {names[0]}.gz) in {folder}: pass the folder that holds the "
        "dataset's files as distributed."
    )


def _read_bytes(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return handle.read()


def _read_idx(path, magic):
    """The array of an IDX file of unsigned bytes, its header checked against its size."""
    data = _read_bytes(path)
    n_dims = magic & 0xFF
    header = 4 + 4 * n_dims
    if len(data) < header or int.from_bytes(data[:4], "big") != magic:
        raise ValueError(f"{path} is not an IDX file of {n_dims}-dimensional unsigned bytes.")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(n_dims))
    if int(np.prod(shape)) != len(data) - header:
        raise ValueError(f"{path}: its header announces {shape}, which does not match its "
                         f"{len(data) - header} bytes of data.")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_mnist(folder):
    """MNIST's 70,000 rows from its four IDX files (``train-images-idx3-ubyte`` and so
    on, gzipped or not) in `folder`."""
    folder, parts = Path(folder), []
    for prefix in ("train", "t10k"):
        images = _read_idx(_find(folder, [f"{prefix}-images-idx3-ubyte",
                                          f"{prefix}-images.idx3-ubyte"]), _IDX_IMAGES)
        labels = _read_idx(_find(folder, [f"{prefix}-labels-idx1-ubyte",
                                          f"{prefix}-labels.idx1-ubyte"]), _IDX_LABELS)
        if len(images) != len(labels):
            raise ValueError(f"{folder}: {len(images)} {prefix} images but {len(labels)} "
                             "labels.")
        parts.append((images.reshape(len(images), -1), labels))
    return _stacked(parts)


def load_svhn(folder):
    """SVHN's 99,289 rows from ``train_32x32.mat`` and ``test_32x32.mat`` in `folder`
    (label 10, the digit 0, becomes 0)."""
    folder, parts = Path(folder), []
    for name in ("train_32x32.mat", "test_32x32.mat"):
        path = _find(folder, [name])
        try:
            content = loadmat(path, variable_names=["X", "y"])
        except (ValueError, TypeError, OSError) as exc:
            raise ValueError(f"{path} is not a MATLAB file of SVHN: {exc}") from exc
        images, labels = content.get("X"), content.get("y")
        if (images is None or labels is None or images.ndim != 4
                or images.shape[:3] != (32, 32, 3) or labels.size != images.shape[3]):
            raise ValueError(f"{path} does not hold SVHN's X of shape (32, 32, 3, n) and y "
                             "of n labels.")
        images = np.moveaxis(images, 3, 0).astype(np.uint8)
        parts.append((images.reshape(len(images), -1), labels.ravel() % 10))
    return _stacked(parts)


def load_cifar10(folder):
    """CIFAR-10's 60,000 rows from its binary version (``data_batch_1.bin`` to
    ``data_batch_5.bin`` and ``test_batch.bin``) in `folder`."""
    folder, parts = Path(folder), []
    for name in CIFAR10_FILES:
        path = _find(folder, [name])
        data = _read_bytes(path)
        if len(data) == 0 or len(data) % _CIFAR10_RECORD:
            raise ValueError(f"{path} is not a CIFAR-10 binary batch: {len(data)} bytes, not "
                             f"a multiple of its {_CIFAR10_RECORD}-byte records.")
        records = np.frombuffer(data, dtype=np.uint8).reshape(-1, _CIFAR10_RECORD)
        if records[:, 0].max() > 9:
            raise ValueError(f"{path} holds a label above 9: not a CIFAR-10 batch.")
        # each record: the label, then the red, green and blue planes of 32 x 32
        images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        parts.append((images.reshape(len(images), -1), records[:, 0]))
    return _stacked(parts)


def _stacked(parts):
    X = np.concatenate([images for images, _ in parts]).astype(np.float32) / 255
    y = np.concatenate([labels for _, labels in parts]).astype(np.int64)
    return X, y


IMAGE_LOADERS = {"mnist": load_mnist, "svhn": load_svhn, "cifar10": load_cifar10}
