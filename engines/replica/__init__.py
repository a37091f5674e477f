"""One Serve replica: the engine (one checkpoint, every mode), the scheduler and its lanes, the
deployment class and its warm-up."""
