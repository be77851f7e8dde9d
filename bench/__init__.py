"""Benchmarks: figures written to bench/results/ and merged into docs/benchmarks/ (the reference
report); unit tests check how they are merged, judged and reported, never the figures themselves."""
