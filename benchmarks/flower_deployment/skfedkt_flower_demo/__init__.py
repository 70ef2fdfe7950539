"""A Flower App running skfedkt's algorithms between SuperNodes; started by ../run.sh."""
