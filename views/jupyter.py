"""Jupyter displays of designs and plans, registered with dsl/display.py's registry.

Loaded through the `gclc.displays` entry point the first time a value asks to be drawn."""

from __future__ import annotations

from ..dsl import display


def _design_svg(design) -> str | None:
    from .render import design_svg

    return design_svg(design)


def _plan_svg(plan) -> str | None:
    from .render import plan_svg

    return plan_svg(plan)


def _plan_html(plan) -> str | None:
    from .report.page import plan_html

    return plan_html(plan)


display.register("Design", "svg", _design_svg)
display.register("Plan", "svg", _plan_svg)
display.register("Plan", "html", _plan_html)
