"""Privacy mechanisms, their accounting and the releases a fit lets out: the bottom layer
that the algorithms build on. The public names are in `skfedkt.privacy`."""
