"""What every decode loop shares: a request's row, steps as generators, sampling, a canvas's settings
and stop flags, prompt-lookup state, scoring a given answer."""
