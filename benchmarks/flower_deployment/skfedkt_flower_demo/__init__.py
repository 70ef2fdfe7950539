"""A Flower App running skfedkt's FedKT between SuperNodes; started by ../run.sh."""
