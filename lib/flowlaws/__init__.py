"""flowlaws: the library of the book *flowlaws*, laid out like the book.

Every module in one line, with the chapters that use it (``I.n`` is Part I chapter n,
``II.n`` Part II chapter n). ``tests/unit/test_layout.py`` fails when a module is missing here.

``flowlaws.common``: shared by both parts (imports neither part)

- :mod:`flowlaws.common.models`
  the models as ``nn.Module`` s: two-layer, deep, SwiGLU, attention, MoE, I.6's character
  language model and image classifier (I.1–I.6, II.1)
- :mod:`flowlaws.common.transformer`
  a causal Transformer of residual RoPE-attention and SwiGLU blocks, without norm gains (I.6)
- :mod:`flowlaws.common.optim`
  the update rules of SGD, heavy ball, Adam, AdamW, written once (I.5, II.6, II.7)
- :mod:`flowlaws.common.fits`
  power-law fits with standard errors (I.5, I.6, II.4)
- :mod:`flowlaws.common.checks`
  argument checks that name the argument (everywhere)
- :mod:`flowlaws.common.chunks`
  sweeps split into chunks of runs (one seed per run) on Dask, each chunk cached (make full)
- :mod:`flowlaws.common.threads`
  independent chunks of one numpy computation on a thread pool, in order (II.5–II.8: the
  cascade test's null and bootstrap)
- :mod:`flowlaws.common.stored`
  stored results of full presets: written, validated, refused when their code changed (II.5–II.8)

``flowlaws.conservation``: Part I, conservation laws of gradient flow

- :mod:`flowlaws.conservation.laws`
  the seed's laws per architecture (balancedness and the MoE's law groups among them), block by
  block in composite models; orthogonality, drift (I.1–I.6)
- :mod:`flowlaws.conservation.flat_params`
  a model as a function of one flat θ: layout, Jacobian, the inputs each model takes (I.1–I.6)
- :mod:`flowlaws.conservation.lie_count`
  the Lie-algebra count of all laws, certified or not (I.1–I.3)
- :mod:`flowlaws.conservation.brackets`
  Lie brackets of gradient fields by forward-mode products, level by level (I.1–I.3)
- :mod:`flowlaws.conservation.spans`
  the numerical rank of a span of rows, with the gap and margin it was read at (I.1–I.3)
- :mod:`flowlaws.conservation.relu_units`
  dead, linear and active ReLU units; seeds redrawn until none is degenerate (I.2)
- :mod:`flowlaws.conservation.count_tables`
  counts against closed forms, one row per model, and their tally; the feed-forward cases; the
  seed's MoE laws against the count, gate by gate, the counter-example, the verdicts (I.2–I.4)
- :mod:`flowlaws.conservation.losses`
  losses of a parameter dict, their gradients, the linear regression set-up (I.1, I.2, I.4–I.6)
- :mod:`flowlaws.conservation.flow`
  gradient flow and its recorded path, conservation errors (I.1, I.2, I.4, I.5)
- :mod:`flowlaws.conservation.training`
  discrete optimisers that record the laws (I.1, I.5, I.6)
- :mod:`flowlaws.conservation.discrete`
  the exact one-step change, the path identity's terms, the step-size sweeps and the four
  fitted windows of an optimiser (I.5)
- :mod:`flowlaws.conservation.law_runs`
  a block's laws recorded along training runs, the one-step τ² gap, optimizer sweeps (I.6)
- :mod:`flowlaws.conservation.deep_laws`
  every block of a deep model: relative rates under the flow, the one-step τ² change (I.6)
- :mod:`flowlaws.conservation.figures`
  Part I's figures (I.1–I.6)

``flowlaws.percolation``: Part II, percolation dynamics of SGD, in five rooms

``flowlaws.percolation.dynamics``: the dynamics: ensembles, the loop, SDE, SGD, Adam and AdamW

- :mod:`flowlaws.percolation.dynamics.ensemble`
  a batched ensemble of two-layer networks (II.1–II.9)
- :mod:`flowlaws.percolation.dynamics.loop`
  the one loop that advances an ensemble, divergence included (II.1–II.9)
- :mod:`flowlaws.percolation.dynamics.sde`
  Euler–Maruyama, SGD read as an SDE, an isotropic-noise control (II.1, II.2)
- :mod:`flowlaws.percolation.dynamics.sgd`
  plain ensemble SGD, a loop over steps, in phases; lr sweeps and their merged and dead
  fractions, the SGD order parameter, SGD against its SDE (II.1–II.5, II.9)
- :mod:`flowlaws.percolation.dynamics.gd`
  plain full-batch gradient descent on an ensemble, a loop over steps (II.4)
- :mod:`flowlaws.percolation.dynamics.adaptive`
  SGD, Adam and AdamW ensembles with heavy-tailed noise (II.6, II.8)
- :mod:`flowlaws.percolation.dynamics.adam_runs`
  II.6's experiments: the joint-state check, trapping runs, cascade runs and their verdicts
- :mod:`flowlaws.percolation.dynamics.seeded`
  ensembles seeded run by run, in chunks: II.8's data sets, students on teacher data (make full)
- :mod:`flowlaws.percolation.dynamics.data_runs`
  II.8's experiment: SGD ensembles on a real data set, C_max, R, report and figure

``flowlaws.percolation.topology``: the topology: invariant sets, C_max, Reeb graphs, fragmentation

- :mod:`flowlaws.percolation.topology.clusters`
  invariant sets, merged groups, pair distances and the order parameter C_max, per run and
  along a recorded path; how far a path strays from a pair or a dead neuron; distinct merge
  heights (II.1–II.9)
- :mod:`flowlaws.percolation.topology.reeb`
  Reeb graphs of merges and splits, their events counted per phase, groups at a time (II.3,
  II.9)
- :mod:`flowlaws.percolation.topology.fragmentation`
  merged neurons that split after a task switch, its counts and texts (II.9)

``flowlaws.percolation.cascade``: the cascade test: variance peaks, null, statistic, verdicts

- :mod:`flowlaws.percolation.cascade.variance`
  relative variance, peaks, λ and the cascade detector (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.surrogates`
  the phase-randomized null model and its test (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.statistic`
  the run-level null (jumps dealt to runs) and the log-periodic comb statistic (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.config`
  CascadeConfig, the SMOKE/READER/FULL presets and every declared threshold (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.geometry`
  is the spacing of the detected levels geometric? (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.detect`
  persistent peaks, the test once, cascades injected into observed runs (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.power`
  power by injection with its interval, power curves, the size that decides (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.judge`
  judge_cascade and the CascadeVerdict chapters get (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.calibration`
  calibration table over level-free and level-structured nulls, power table (II.5)
- :mod:`flowlaws.percolation.cascade.stats`
  Holm's correction over settings, whether power fits a grid (II.5–II.8)
- :mod:`flowlaws.percolation.cascade.models`
  the controls judged (hierarchical, random-pair, ring) and the SGD experiment (II.5)
- :mod:`flowlaws.percolation.cascade.slider`
  a verdict as a slider point and caption badge (II.5)
- :mod:`flowlaws.percolation.cascade.search`
  the search for an SGD setting with a real cascade, declared before it ran (II.5)
- :mod:`flowlaws.percolation.cascade.verdicts`
  verdict lines, λ against a claim, the seed's test beside a verdict, ledger texts (II.5–II.8)

``flowlaws.percolation.grokking``: model, training, checkpoints, order parameters, analysis

- :mod:`flowlaws.percolation.grokking.model`
  modular addition and Nanda et al.'s one-layer Transformer, batched over runs (II.7)
- :mod:`flowlaws.percolation.grokking.training`
  training a grokking ensemble, interruptibly, with its records (II.7)
- :mod:`flowlaws.percolation.grokking.fourier`
  MLP neurons' key frequencies and the frequency C_max (II.7)
- :mod:`flowlaws.percolation.grokking.analysis`
  delay ratios, runs aligned by their grokking step, verdicts with Holm's correction (II.7)
- :mod:`flowlaws.percolation.grokking.cascade_claim`
  the four C_max series, the cascade test on each, the grokking cascade's ledger row (II.7)
- :mod:`flowlaws.percolation.grokking.checkpoints`
  a grokking run's folder: its key, checkpoints with a fallback, C_max at any tolerance (II.7)
- :mod:`flowlaws.percolation.grokking.figures`
  accuracy as median bands with each run's grokking step; R with a first-point spike clipped (II.7)

``flowlaws.percolation.toys``: toy models with known answers

- :mod:`flowlaws.percolation.toys.planted`
  teacher data and targets, the cyclic problem, starts near the permutation set: planted pairs,
  merged ensembles (II.1–II.4, II.6, II.9)
- :mod:`flowlaws.percolation.toys.quartic`
  the quartic well: noise makes an invariant set attractive (II.1, II.2)
- :mod:`flowlaws.percolation.toys.merge_processes`
  block merges against Erdős–Rényi growth, the last jump's closed form (II.4)
- :mod:`flowlaws.percolation.toys.cascades`
  a planted cascade, the kinematic ring model, hierarchical and random-pair merging (II.5)
- :mod:`flowlaws.percolation.toys.level_nulls`
  shared levels without geometry: the cascade test's level-structured nulls (II.5)
- :mod:`flowlaws.percolation.toys.fake_cascades`
  noise that a raw peak detector takes for a cascade: white and AR(1) signals (II.5)

``flowlaws.percolation``, beside its rooms

- :mod:`flowlaws.percolation.power_example`
  one cascade planted in a real ensemble and what the test sees of it: why its power is low (II.5)
- :mod:`flowlaws.percolation.full_run`
  run a full preset and store its result: ``make full``, ``make gpu-check`` and a chapter's
  ``full_preset = True`` (II.5–II.8)

``flowlaws.percolation.presets``: every Part II full preset, the sizes that decide a chapter's
claims, run by ``make full``, one module each

- :mod:`flowlaws.percolation.presets.base`
  what the presets share: FullPreset, the judge's full settings, chunked ensembles (II.5–II.8)
- :mod:`flowlaws.percolation.presets.sgd_search`
  II.5's declared SGD search at full size (II.5)
- :mod:`flowlaws.percolation.presets.cascade_calibration`
  II.5's calibration and power tables at full size (II.5)
- :mod:`flowlaws.percolation.presets.controls`
  II.5's three model controls at 256 runs, with the size search and the jump ladder (II.5)
- :mod:`flowlaws.percolation.presets.adaptive_cascade`
  SGD, Adam and AdamW at 1,024 runs (II.6)
- :mod:`flowlaws.percolation.presets.grokking_delay`
  the grokking ensemble trained to 24,000 steps, the delay claim (II.7)
- :mod:`flowlaws.percolation.presets.grokking_cascade`
  the same 24,000-step run's four C_max series judged, the cascade claim (II.7)
- :mod:`flowlaws.percolation.presets.real_data`
  Heart Disease at 2,048 runs and digits at 512 (II.8)

``flowlaws.data``: data that ships, and readers for files you give

- :mod:`flowlaws.data.text`
  Shakespeare, WikiText, Penn Treebank, and ``load_text``, the one call for any of them (I.6)
- :mod:`flowlaws.data.images`
  digits, CIFAR-10, MNIST / Fashion-MNIST, image folders, and ``load_images`` (I.6, II.8)
- :mod:`flowlaws.data.tabular`
  CSV tables: the UCI Heart Disease data that ships (II.8)
- :mod:`flowlaws.data.files`
  checked paths that name a missing file (I.6, II.8)

``flowlaws.book``: the book's plumbing (imports nothing scientific from flowlaws)

- :mod:`flowlaws.book.runtime`
  device choice, seeds, one torch thread (every chapter)
- :mod:`flowlaws.book.progress`
  progress bars, or reports to a live figure (every long loop)
- :mod:`flowlaws.book.cache.calls`
  ``cached_call``: a cached call keyed by the function and everything it reads (II.1–II.9)
- :mod:`flowlaws.book.cache.keys`
  cache keys: arguments, functions (a helper module's by its code) and numbers described by
  their content, the library's fingerprint (II.1–II.9)
- :mod:`flowlaws.book.cache.paths`
  files and folders in a key, by the SHA-256 of their content (II.1–II.9)
- :mod:`flowlaws.book.cache.codec`
  the closed stored format: only registered classes are rebuilt (II.1–II.9)
- :mod:`flowlaws.book.cache.store`
  entries on disk: checksummed, written atomically, refused and recomputed when damaged
  (II.1–II.9)
- :mod:`flowlaws.book.style`
  the book's matplotlib style (every chapter), with matplotlib's own fonts registered where a
  shared font cache lacks them
- :mod:`flowlaws.book.tables`
  the one table helper (I.2–I.5, II.5)
- :mod:`flowlaws.book.interactive`
  slider figures: the one call a chapter makes (I.1, I.5, II.2, II.5)
- :mod:`flowlaws.book.sliders`
  knobs, points and the precomputed grid of a slider figure
- :mod:`flowlaws.book.vega`
  the static Vega-Lite view of a slider figure
- :mod:`flowlaws.book.live`
  the live ipywidgets view of a slider figure
- :mod:`flowlaws.book.saved_outputs`
  a notebook saved by ``make lab`` keeps static figures, not kernel-bound widgets
- :mod:`flowlaws.book.lab.roles`
  ``make lab`` shows citations, cross-references and pasted values as readable links, and
  saves the roles
- :mod:`flowlaws.book.lab.book_index`
  the book as ``lab.roles`` reads it: labels, documents, citations, the last build's glue
- :mod:`flowlaws.book.lab.kernel_language`
  a notebook opened by ``make lab`` is not marked unsaved when its kernel connects
- :mod:`flowlaws.book.sphinxext`
  the Sphinx extension: chart libraries where needed, a static build, a clean console, the
  book's stylesheet, alt text from captions, the executed notebook for download
- :mod:`flowlaws.book.theorem_index`
  the book's theorem index page (the ``{theorem-index}`` directive)
- :mod:`flowlaws.book.ledger`
  ``record_claim``: a chapter's verdict on a seed's claim, glued for the claims ledger (I.1–II.9)
- :mod:`flowlaws.book.findings`
  the findings box (tally of verdicts per part and family) and verdict badges (intro, ledger)
- :mod:`flowlaws.book.rules.rule`
  a decision rule as data (statistic, threshold, margin, window, size, reason, commit) and
  its first rule when it was revised after the data
- :mod:`flowlaws.book.rules.conservation`
  the declared rules of Part I's claims (the ledger)
- :mod:`flowlaws.book.rules.percolation`
  the declared rules of Part II's claims (the ledger), with the three revised after the data

Conventions (``CONTRIBUTING.md``): weight shapes follow PyTorch's ``out x in`` everywhere (a
linear layer ``y = W x`` stores ``W`` with shape ``(n_out, n_in)``); ensembles carry a leading
``n_runs`` dimension; a diverged run is NaN, never a number.
"""

from flowlaws.book.runtime import pick_device, seed_everything

__version__ = "0.1.0"
__all__ = ["pick_device", "seed_everything", "__version__"]
