"""Run every ``bench/bench_*.py`` module's ``main()`` in turn."""

import importlib
import pkgutil

import bench

modules = sorted(
    m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
)
if not modules:
    print("no benchmarks yet")
for name in modules:
    print(f"== {name}")
    importlib.import_module(f"bench.{name}").main()
