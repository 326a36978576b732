"""Rich displays (Jupyter's `_repr_svg_` / `_repr_html_`) for the pipeline's values.

Values live in low layers (a `Design` in compiler/, a `Plan` in solver/); drawing them is the
job of views/, which sits above both. So a value asks this registry for its drawing instead of
importing upward. Renderers register themselves, and the registry finds the installed ones
through the `gclc.displays` entry-point group (views/ declares its own in pyproject.toml), the
way any plugin would: nothing here names the layer that draws.
"""

from __future__ import annotations

from typing import Any, Callable

Renderer = Callable[[Any], "str | None"]
_RENDERERS: dict[tuple[str, str], Renderer] = {}
_discovered = False


def register(type_name: str, mime: str, renderer: Renderer) -> None:
    """Draw values whose class is called `type_name` as `mime` ("svg" or "html")."""
    _RENDERERS[(type_name, mime)] = renderer


def render(value: Any, mime: str) -> str | None:
    """The drawing of `value`, or None when nothing can draw it (Jupyter then shows its repr)."""
    _discover()
    for cls in type(value).__mro__:
        renderer = _RENDERERS.get((cls.__name__, mime))
        if renderer is not None:
            return renderer(value)
    return None


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    from importlib.metadata import entry_points  # only when a value is first drawn

    for point in entry_points(group="gclc.displays"):
        point.load()  # importing the module registers its renderers
