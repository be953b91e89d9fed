"""Devices: what the engine may know of an accelerator (the host counts as one)."""
