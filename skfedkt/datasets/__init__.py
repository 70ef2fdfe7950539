"""Splitting data into parties, and federated datasets."""

from ._loaders import DATASETS, load_federated, load_local_file
from ._partition import dirichlet_partition, iid_partition

__all__ = [
    "DATASETS",
    "dirichlet_partition",
    "iid_partition",
    "load_federated",
    "load_local_file",
]
