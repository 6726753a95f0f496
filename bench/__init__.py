"""Benchmarks: run each from the repository root as a module, `python -m bench.bench_fetch`
(see bench/README.md), so `bench.*` and `testkit.*` import without path edits."""
