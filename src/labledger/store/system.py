"""System metrics of a run: sampled on a background thread into the run's ``system.jsonl``.

``start_run(..., system_metrics=True)`` (off by default; ``labledger.wandb`` runs turn it on, as
W&B does) starts a :class:`SystemSampler`: once a second it writes one record with the process's
CPU % (of one core) and RSS, the machine's memory in use, and, when a GPU is present, each
device's memory and utilisation (through NVML when ``pynvml`` is installed, else ``torch.cuda`` when
torch is already imported; labledger never imports torch for this). Each sample is one ``write(2)``
of a whole line, so a ``kill -9`` loses at most the sample in flight. The thread stops with the run.

>>> import tempfile, labledger
>>> ledger_dir = tempfile.mkdtemp()
>>> with labledger.start_run("sys", ledger=ledger_dir, system_metrics=True) as run:
...     pass
>>> rec = next(labledger.open_ledger(ledger_dir).run(run.id).records("system"))
>>> sorted(k for k in rec if not k.startswith("gpu"))
['cpu_percent', 'mem_available_mb', 'mem_used_percent', 'rss_mb', 'time']
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from labledger.store.jsonl import RECORD_FILES, Appender

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        try:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
            return int(peak if sys.platform == "darwin" else peak * 1024)
        except (ImportError, OSError):
            return None


def _machine_memory() -> tuple[float, float] | None:
    """(used %, available MiB) from /proc/meminfo, else None."""
    try:
        info: dict[str, int] = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0])  # KiB
        total, available = info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))
        return 100.0 * (total - available) / total, available / 1024
    except (OSError, KeyError, ValueError, ZeroDivisionError):
        return None


class _Gpus:
    """Per-device memory and utilisation via NVML (pynvml) or an already-imported torch.cuda."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        self.torch: Any = None
        try:
            pynvml: Any = importlib.import_module("pynvml")
            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.nvml = pynvml
        except Exception:  # noqa: BLE001 - no NVML library, no driver, no device: no GPU metrics from NVML
            self.nvml = None
        if self.nvml is None:
            torch = sys.modules.get("torch")
            try:
                if torch is not None and torch.cuda.is_available():
                    self.torch = torch
            except Exception:  # noqa: BLE001 - a broken CUDA setup must not stop the run
                self.torch = None

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.nvml is not None:
            for i, h in enumerate(self.handles):
                try:
                    mem = self.nvml.nvmlDeviceGetMemoryInfo(h)
                    util = self.nvml.nvmlDeviceGetUtilizationRates(h)
                except Exception:  # noqa: BLE001 - a device that stops answering: skip this sample
                    continue
                out[f"gpu.{i}.util_percent"] = float(util.gpu)
                out[f"gpu.{i}.memory_used_mb"] = mem.used / 2**20
                out[f"gpu.{i}.memory_percent"] = 100.0 * mem.used / mem.total if mem.total else 0.0
        elif self.torch is not None:
            cuda = self.torch.cuda
            for i in range(cuda.device_count()):
                out[f"gpu.{i}.memory_allocated_mb"] = cuda.memory_allocated(i) / 2**20
                out[f"gpu.{i}.memory_reserved_mb"] = cuda.memory_reserved(i) / 2**20
                with contextlib.suppress(Exception):  # utilisation needs pynvml in torch
                    out[f"gpu.{i}.util_percent"] = float(cuda.utilization(i))
        return out


class SystemSampler:
    """Writes one system sample a second to ``run_dir/system.jsonl`` until :meth:`stop`."""

    def __init__(self, run_dir: str | os.PathLike[str], interval: float = 1.0) -> None:
        self.path = Path(run_dir) / RECORD_FILES["system"]
        self.interval = float(interval)
        self._out = Appender(self.path)
        self._stop = threading.Event()
        self._gpus = _Gpus()
        self._last_cpu = time.process_time()
        self._last_wall = time.monotonic()
        self.samples = 0
        #: ``(samples, file size, mtime_ns)`` after the last complete write, set in one assignment
        #: so that the run's index counters never see a count and a size that disagree.
        self.position: tuple[int, int, int] | None = None
        self._thread = threading.Thread(target=self._loop, name="labledger-system-metrics", daemon=True)
        self._thread.start()

    def sample(self) -> dict[str, Any]:
        """One sample (also written by the thread): CPU %, RSS, machine memory, GPUs."""
        cpu, wall = time.process_time(), time.monotonic()
        elapsed = wall - self._last_wall
        rec: dict[str, Any] = {"time": time.time()}
        rec["cpu_percent"] = 100.0 * (cpu - self._last_cpu) / elapsed if elapsed > 0 else 0.0
        self._last_cpu, self._last_wall = cpu, wall
        rss = _rss_bytes()
        if rss is not None:
            rec["rss_mb"] = rss / 2**20
        mem = _machine_memory()
        if mem is not None:
            rec["mem_used_percent"], rec["mem_available_mb"] = mem
        rec.update(self._gpus.sample())
        return rec

    def _loop(self) -> None:
        while True:
            try:
                self._out.append(self.sample())
                self.samples += 1
                st = os.fstat(self._out.fd)
                self.position = (self.samples, st.st_size, st.st_mtime_ns)
            except Exception:  # noqa: BLE001 - a full disk or a closed file ends sampling, never the run
                return
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        """Stop the thread (waits for it) and close the file."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._out.close()


def start_sampler(run_dir: str | os.PathLike[str], interval: float = 1.0) -> SystemSampler:
    """Start sampling into ``run_dir/system.jsonl`` (see :class:`SystemSampler`).

    >>> import tempfile
    >>> s = start_sampler(tempfile.mkdtemp(), interval=60); s.stop(); s.samples
    1
    """
    return SystemSampler(run_dir, interval)
