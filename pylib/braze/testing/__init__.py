"""Harnesses shared by braze's tests and benchmark scripts."""
