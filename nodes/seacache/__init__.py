"""SeaCache in ComfyUI: the Apply and Stats nodes, the runtime that drives one sampling run, the seams, composition
with other nodes and the timeline chart."""
