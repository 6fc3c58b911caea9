"""SeaCache in ComfyUI: the Apply and Stats nodes, the wrappers that drive one sampling run (:mod:`.hooks`), the
seams, composition with other nodes and the timeline chart."""
