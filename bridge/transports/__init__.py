"""I/O loops around the sans-I/O pipelines; they know frames, never dialects."""
