"""What the tests, benchmarks and the demo share: the ComfyUI harness (a CPU ComfyUI session from
``$COMFYUI_PATH``, the pack imported as ComfyUI would), tiny random-weight checkpoints and their writers,
random-weight Cosmos3 models built on a device, tiny stand-ins for other model families, the composition and
control cases, the diffusers reference, the host-read counter and the workflow runner. Nothing of the shipped pack
imports it."""
