"""The benchmarks: each runs by name from the repository root (``python -m benchmarks.<bench>``)."""
