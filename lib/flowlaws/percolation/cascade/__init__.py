"""Part II's cascade test: relative variance and its peaks, the run-level null and comb
statistic, the seed's surrogates, the test and its verdict, calibration, power, verdict texts
(II.5–II.8)."""
