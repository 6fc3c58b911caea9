"""SeaCache on models whose layers pollockjj/ComfyUI-MultiGPU's DisTorch 2 spreads over devices, tested at a38cbda
(needs COMFYUI_PATH, ComfyUI-MultiGPU and ComfyUI-GGUF in $ECOSYSTEM_PACKS_PATH or ComfyUI's custom_nodes; skips
naming what it misses; the pack needs ComfyUI's ``comfy.memory_management``, which 0.3.64 lacks).

How DisTorch 2 works (distorch_2.py): its loader nodes tag the model with an allocation; when ComfyUI loads the model
for sampling, its replacement of ``ModelPatcher.partially_load`` moves each layer to the device the allocation
gives it and marks the layers off the compute device ``comfy_cast_weights``, so ComfyUI's ops copy their weights to
the compute device at each forward. Every activation, the stack's output included, stays on the compute device,
and so does SeaCache's residual history (SeaCache keeps each residual where the stack produced it).

On a CPU-only machine its device list is just "cpu". Two CPU devices are emulated by naming the donor "cpu:0":
torch places its tensors on the CPU, but DisTorch takes it for another device than the compute device "cpu", so
half of the layers take the donor's path (moved there, weights copied at each forward) as on a real second device.
DisTorch turns each device's share into a fraction of that device's total memory rounded to 4 decimals, which for a
1-4 MB model is 0 of this machine's RAM: the devices report 64 MiB of memory while a test runs (``small_devices``).
What needs a GPU, and is left to the GPU check (``test_history_stays_on_the_compute_device_cuda``, run with
``COMFYUI_HARNESS_DEVICE=gpu``): layers on a CUDA compute device with CPU or second-GPU donors, the history's device
then differing from the donor layers', and the copies DisTorch's ops make between them."""

import sys

import pytest
import torch

from seacache_testing import ecosystem_packs, gguf_models, tiny_comfy_models
from seacache_testing.anymodel_runs import last_report, sample
from seacache_testing.composition_cases import with_defaults

STEPS = 12
SPEC = tiny_comfy_models.SPECS["wan21_t2v"]
LOADERS = {"safetensors": "UNETLoaderDisTorch2MultiGPU", "gguf": "UnetLoaderGGUFDisTorch2MultiGPU"}


@pytest.fixture(scope="module")
def distorch(comfy, pack, tmp_path_factory):
    """ComfyUI with ComfyUI-MultiGPU loaded (every ComfyUI function it replaces is put back after this module) and
    the tiny Wan 2.1 T2V written as safetensors and as a Q8_0 GGUF into a diffusion_models folder."""
    pytest.importorskip("gguf", reason="the gguf package (ComfyUI-GGUF's requirement, pip install gguf) is missing")
    from safetensors.torch import save_file

    folder = tmp_path_factory.mktemp("distorch_models")
    model = tiny_comfy_models.build("wan21_t2v")
    save_file(dict(model.model.diffusion_model.state_dict()), str(folder / "wan21_t2v.safetensors"))
    gguf_name, _ = gguf_models.write_model("wan21_t2v", str(folder), "Q8_0")
    comfy.folder_paths.add_model_folder_path("diffusion_models", str(folder))
    with ecosystem_packs.restored():
        why = ecosystem_packs.load(comfy, ecosystem_packs.MULTIGPU)
        if why:
            pytest.skip(why)
        files = {"safetensors": "wan21_t2v.safetensors", "gguf": gguf_name}
        ecosystem_packs.distorch_model(comfy, LOADERS["gguf"], files["gguf"], "cpu", "cpu:0")  # its loaders' patches
        yield {**files, "plain": model}


@pytest.fixture
def small_devices(comfy, monkeypatch):
    """Every device reports 64 MiB of total memory (what DisTorch divides each device's share by)."""
    total = 64 * 1024 ** 2
    monkeypatch.setattr(comfy.mm, "get_total_memory", lambda dev=None, torch_total_too=False: (total, total) if torch_total_too else total)


def seacache(comfy, model, **inputs):
    return with_defaults(comfy, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, **inputs)


def residual_devices(pack, monkeypatch) -> list:
    """The device of every residual SeaCache's histories record from now on (the pack as ComfyUI loaded it)."""
    history = sys.modules[f"{pack.__name__}.seacache_core.extrapolate"].ResidualHistory
    devices, append = [], history.append

    def recording(self, step, residual):
        devices.append(residual.device)
        return append(self, step, residual)

    monkeypatch.setattr(history, "append", recording)
    return devices


def donor_layers(model) -> list[str]:
    """Layers DisTorch marked to have their weights copied to the compute device at each forward."""
    return [name for name, module in model.model.diffusion_model.named_modules() if vars(module).get("comfy_cast_weights")]


def check_split_run(comfy, pack, monkeypatch, distorch, kind: str, compute: str, donor: str):
    """The checks every placement shares: DisTorch spreads the layers over both devices; SeaCache at threshold 0 is
    bit-identical to the same DisTorch graph without it (and, where DisTorch only moves weights, to the model loaded
    whole); at the node's defaults it reuses, every residual on the compute device. Returns (the output without
    SeaCache, the run's report, the relative L2 error at the defaults)."""
    model = ecosystem_packs.distorch_model(comfy, LOADERS[kind], distorch[kind], compute, donor)
    plain = sample(comfy, model, SPEC, steps=STEPS)
    placement = ecosystem_packs.distorch_placement(model)
    assert {compute, donor} <= set(placement.values()), placement
    donors = donor_layers(model)
    assert donors and all(placement[f"diffusion_model.{name}"] == donor for name in donors)
    assert torch.equal(sample(comfy, seacache(comfy, model, threshold=0.0), SPEC, steps=STEPS), plain)
    devices = residual_devices(pack, monkeypatch)
    patched = seacache(comfy, model)
    cached = sample(comfy, patched, SPEC, steps=STEPS)
    report = last_report(patched)
    assert report["status"] == "completed" and report["uncached_calls"] == 0 and report["reused"] > 0
    assert devices and set(devices) == {torch.device(compute)} and cached.device == plain.device
    error = float((cached - plain).norm() / plain.norm())
    assert torch.isfinite(cached).all() and 0 < error < 0.05
    return plain, report, error


@pytest.mark.parametrize("kind", list(LOADERS))
def test_layers_on_two_cpu_devices(comfy, pack, monkeypatch, distorch, small_devices, kind):
    plain, report, error = check_split_run(comfy, pack, monkeypatch, distorch, kind, "cpu", "cpu:0")
    print(f"\nDisTorch 2 ({kind}), half the bytes on a donor: node defaults reused {report['reused']} of "
          f"{report['calls']} calls, relative L2 error {error:.4f}")
    if kind == "safetensors":  # DisTorch only moves the weights: the model loaded whole samples the same
        assert torch.equal(plain, sample(comfy, distorch["plain"], SPEC, steps=STEPS))


def test_memory_estimate_reaches_distorch_loader(comfy, distorch, small_devices, asked):
    """DisTorch replaces ComfyUI's ``load_models_gpu`` and frees ``memory_required`` per compute device from it: the
    residual history SeaCache adds to the estimate (2 branches x 2 residuals x 48 tokens x 128 wide x 4 bytes) is in
    what it is asked to free."""
    assert comfy.model_patcher.ModelPatcher._distorch_patched  # `asked` records through DisTorch's load_models_gpu
    model = ecosystem_packs.distorch_model(comfy, LOADERS["safetensors"], distorch["safetensors"], "cpu", "cpu:0")
    sample(comfy, model, SPEC, steps=1)
    sample(comfy, seacache(comfy, model), SPEC, steps=1)
    assert asked[1] - asked[0] == 2 * 2 * 48 * 128 * 4


@pytest.mark.cuda
@pytest.mark.parametrize("donor", ["cpu", "cuda:1"])
def test_history_stays_on_the_compute_device_cuda(comfy, pack, monkeypatch, distorch, small_devices, donor):
    if comfy.args.cpu or not torch.cuda.is_available():
        pytest.skip("needs CUDA and ComfyUI on the GPU (COMFYUI_HARNESS_DEVICE=gpu)")
    if donor == "cuda:1" and torch.cuda.device_count() < 2:
        pytest.skip("needs a second CUDA device")
    for kind in LOADERS:
        check_split_run(comfy, pack, monkeypatch, distorch, kind, "cuda:0", donor)
