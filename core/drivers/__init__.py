"""The tuners that drive the state machine: function-level and contextual."""
