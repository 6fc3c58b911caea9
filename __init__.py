"""SeaCache for Cosmos3: ComfyUI entry point. Node modules are imported only when ComfyUI asks for them."""

WEB_DIRECTORY = "./web"


async def comfy_entrypoint():
    """ComfyUI V3 entry point: the pack's extension (SeaCache nodes and the native Cosmos3 nodes)."""
    from .nodes.extension import SeaCacheExtension

    return SeaCacheExtension()


__all__ = ["WEB_DIRECTORY", "comfy_entrypoint"]
