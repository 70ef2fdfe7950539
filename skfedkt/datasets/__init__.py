"""Splitting data into parties, and federated datasets."""

from ._partition import dirichlet_partition, iid_partition

__all__ = ["dirichlet_partition", "iid_partition"]
