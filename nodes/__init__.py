"""Everything of the pack that touches ComfyUI. Importing this package imports nothing of ComfyUI; the node
modules (and :mod:`.extension`) do."""
