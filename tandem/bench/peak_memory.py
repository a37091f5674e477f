"""Peak memory of a piece of work, as the operating system (CPU) or the allocator (CUDA) sees it.

On Linux the kernel keeps a process's peak resident set (VmHWM) and resets it to the current
resident set when "5" is written to /proc/self/clear_refs, so the peak of one step loop can be read
without the model's loading or an earlier run in it. Large tensors are mmapped by the C allocator
and returned when freed, so the peak follows the tensors that were alive at once.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

MB = 1 << 20


def resident_mb() -> float:
    return _status_kb("VmRSS") / 1024


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {key}")


class Peak:
    """What `peak_memory` measured: `before_mb` when it began, `peak_mb` the most at once."""

    def __init__(self, before_mb: float):
        self.before_mb = before_mb
        self.peak_mb = before_mb

    @property
    def added_mb(self) -> float:
        return self.peak_mb - self.before_mb


@contextmanager
def peak_memory(device: str | torch.device = "cpu"):
    """Measure the peak memory of the `with` body: resident memory of this process on a CPU, memory
    the CUDA allocator handed out on a GPU. The model and anything else alive before count in both
    `before_mb` and `peak_mb`."""
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        peak = Peak(torch.cuda.memory_allocated(device) / MB)
    else:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        peak = Peak(resident_mb())
    try:
        yield peak
    finally:
        if cuda:
            torch.cuda.synchronize(device)
            peak.peak_mb = torch.cuda.max_memory_allocated(device) / MB
        else:
            # the kernel updates VmHWM lazily: it can trail a resident size read a moment earlier
            peak.peak_mb = max(_status_kb("VmHWM") / 1024, resident_mb(), peak.before_mb)
