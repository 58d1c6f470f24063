"""Runtimes: where and how nodes run."""
