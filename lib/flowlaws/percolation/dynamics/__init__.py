"""Part II's dynamics: ensembles of two-layer networks, the loop that advances them, SGD as an
SDE, plain SGD, Adam and AdamW (II.1–II.9)."""
