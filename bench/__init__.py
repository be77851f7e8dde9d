"""Benchmarks: figures printed and written to bench/results/, never asserted in unit tests."""
