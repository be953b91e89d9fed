"""Observers: what happens to tuning events (logs, progress, metrics)."""
