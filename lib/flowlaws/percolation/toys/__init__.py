"""Part II's toy models, each with a known answer: the quartic well, planted and merge-model
cascades with the kinematic ring, block merges against Erdős–Rényi growth (II.1–II.5)."""
