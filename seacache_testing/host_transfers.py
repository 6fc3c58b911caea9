"""Counts the device-to-host reads a piece of code would make on a GPU, while it runs on the CPU.

On a CUDA device every read of a device tensor's value by the host (``.item()``, ``.tolist()``, ``bool()``,
``float()``, ``int()``, indexing with a tensor, ``.cpu()``, ``.to("cpu")``, ``.numpy()``, ``torch.equal``) waits
for the device queue and copies to the host. On the CPU nothing tells a host tensor from a "device" one, so
:class:`HostReads` (a ``TorchFunctionMode``) tracks them: tensors made before it starts (inputs, weights) and tensors
made on an explicit ``device`` are device tensors; the results of ``.cpu()`` / ``.to("cpu")`` and of factories
without a ``device`` are host tensors, and so is every result computed from host tensors only. A read of a device
tensor is recorded with the pack's source line that made it. A host copy is always a new tensor (cloned when
torch returns the source itself, as ``.cpu()`` of a CPU tensor does). ``.to(x.device)`` moves are never reads (on a GPU
they go host to device or stay put); the pack writes host copies as ``.cpu()`` / ``.to("cpu")``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

ROOT = str(Path(__file__).resolve().parents[1])
READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy", "cpu", "equal"}


def _is_cpu(target) -> bool:
    return isinstance(target, str) and target == "cpu"


class HostReads(TorchFunctionMode):
    """Records each device-to-host read as (operation, "file:line" of the pack's code that made it)."""

    def __init__(self):
        super().__init__()
        self.reads: list[tuple[str, str]] = []
        self._host = WeakIdKeyDictionary()

    def _device_tensors(self, values) -> list[torch.Tensor]:
        return [v for v in values if isinstance(v, torch.Tensor) and v not in self._host]

    def _caller(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(ROOT) and not name.endswith("host_transfers.py"):
                return f"{Path(name).relative_to(ROOT)}:{frame.f_lineno}"
            frame = frame.f_back
        return "?"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        inputs, _ = tree_flatten((args, kwargs))
        tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
        on_device = self._device_tensors(tensors)
        to_host = name == "cpu" or (name == "to" and (any(_is_cpu(a) for a in args[1:]) or _is_cpu(kwargs.get("device"))))
        if on_device and (name in READS or to_host):
            self.reads.append((name, self._caller()))
        out = func(*args, **kwargs)
        if to_host and out is args[0]:
            out = out.clone()  # on a GPU the host copy is a new tensor; here too, so the source stays a device one
        explicit_device = "device" in kwargs and kwargs["device"] is not None and not _is_cpu(kwargs["device"])
        moved = name == "to" and not to_host and any(isinstance(a, (torch.device, torch.Tensor)) for a in args[1:])
        host_result = to_host or (not explicit_device and not moved and not on_device and (tensors or name not in READS))
        if host_result:
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor):
                    self._host[value] = True
        return out

