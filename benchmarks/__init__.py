"""Benchmarks: one script per performance target, run as ``python -m benchmarks.<name>``; the
last line each prints is its JSON figure."""
