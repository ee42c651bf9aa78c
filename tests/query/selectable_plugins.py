"""Plug-ins that run only when a spec names them (``ragspine query --plugin
tests.query.selectable_plugins --transform echo --postprocessor stamp:2``).

* transform ``echo`` (``always=False``): adds the variant ``"<query> battery"``;
* post-processor ``stamp`` (a factory taking ``:ARG``): tags every hit with
  ``scores["stamp"] = ARG`` (1.0 without one).
"""

from __future__ import annotations

from ragspine_query.pipeline import register_postprocessor_factory, register_transform


def echo(variants: list[str]) -> list[str]:
    return [*variants, f"{variants[0]} battery"]


class Stamp:
    def __init__(self, value: float) -> None:
        self.value = value
        self.describe = f"stamp={value}"

    def __call__(self, query, hits):
        return [h.with_score(h.score, stamp=self.value) for h in hits]


def register() -> None:
    register_transform("echo", echo, always=False, replace=True)
    register_postprocessor_factory("stamp", lambda ctx: Stamp(float(ctx.arg or 1.0)), takes_arg=True, replace=True)


register()
