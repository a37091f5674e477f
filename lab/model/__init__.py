"""Offline work on the model (never imported by the request path): the task suite the embedded
model learns from (`tasks`), training (`train`), quality evaluation (`evaluate`) and builders of
tiny DiffusionGemma configs and checkpoints (`tiny`), used by training, benchmarks and tests."""
