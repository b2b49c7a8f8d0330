"""Part II of the book: SGD ensembles, invariant sets, merges, percolation and DSI cascades."""
