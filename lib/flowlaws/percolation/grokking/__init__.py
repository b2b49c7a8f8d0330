"""Part II's grokking room: the modular-addition Transformer, its checkpointed training, the
order parameters (Fourier and weight-space C_max) and the analysis of delays and cascades (II.7)."""
