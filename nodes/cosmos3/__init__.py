"""The native Cosmos3 in ComfyUI: loader, model, prompts, latents and schedules, guidance, sound, VAE and LoRA keys.
It knows nothing of SeaCache."""
