"""The tuning state machine and its stages, from KEY to PERSIST; the records it makes."""
