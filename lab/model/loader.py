"""Training batches from worker processes, so that an accelerator never waits on Python.

A batch is a pure function of (seed, step) (the `build` handed in: `lab.model.train.make_batch`, sample items, render the
chat template, tokenize, lay out), so a map-style dataset indexed by step is exact: N workers build
steps ahead of the loop in any order and the loop receives them in step order, the same batches a
single process would build, and a resumed run replays them. With no workers the batches are built
in the loop's own process, as on a 2-core CPU, where a worker would only take the core the model
needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

NO_END = 2**62  # a step budget nobody reaches: the loop stops on its own budget and drops the loader


class StepBatches(Dataset):
    """The batch of step i, built on demand (in whatever process the loader runs it)."""

    def __init__(self, build, tokenizer, cfg):
        self.build, self.tokenizer, self.cfg = build, tokenizer, cfg

    def __len__(self) -> int:
        return NO_END

    def __getitem__(self, step: int):
        return self.build(self.tokenizer, self.cfg, step)


def _quiet_tokenizer(_worker: int) -> None:
    # A fast tokenizer used before fork() would otherwise warn, and its thread pool is not fork-safe:
    # each worker tokenizes one item at a time on its own core anyway.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    torch.set_num_threads(1)


def batches(build, tokenizer, cfg, start: int, workers: int = 0, pin_memory: bool = False, prefetch: int = 4) -> Iterator:
    """Batches of steps start, start + 1, ... in order, each `build(tokenizer, cfg, step)`; built in
    `workers` processes (0: here). `build` is handed in, so the loader does not import the trainer."""
    data = StepBatches(build, tokenizer, cfg)
    if workers <= 0:
        return (data[step] for step in range(start, NO_END))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the fork: the parent's pool is then never started
    loader = DataLoader(
        data, batch_size=None, sampler=range(start, NO_END), num_workers=workers, pin_memory=pin_memory,
        prefetch_factor=prefetch, worker_init_fn=_quiet_tokenizer, multiprocessing_context="fork",
    )
    return iter(loader)


__all__ = ["StepBatches", "batches"]
