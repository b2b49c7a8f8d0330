"""Part II's topology: invariant sets and who has merged (C_max), Reeb graphs of merges and
splits, fragmentation after a task switch (II.2–II.9)."""
