"""What the tests, benchmarks and the demo share: the ComfyUI harness (a CPU ComfyUI session from
``$COMFYUI_PATH``, the pack imported as ComfyUI would), tiny random-weight checkpoints and their writers,
random-weight Cosmos3 models built on a device, tiny stand-ins for other model families, the composition and
control cases, the diffusers reference, the host-read counter, the workflow runner, and the benchmarks' library:
the trained quality proxies (``quality_proxy`` and its data sources), the runs and statistics the quality
benchmarks compare (``proxy_jobs``, ``pair_stats``), the peer comparison and the third-party cache packs
(``peer_comparison``, ``peer_packs``) and the Cosmos3 memory plan. Nothing of the shipped pack imports it."""
