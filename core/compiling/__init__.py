"""COMPILE: candidates compiled ahead of MEASURE, on threads or in forked processes."""
