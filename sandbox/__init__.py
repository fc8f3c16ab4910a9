"""A local Discord stand-in for tests, benchmarks and the demo. Imports nothing from the project."""
