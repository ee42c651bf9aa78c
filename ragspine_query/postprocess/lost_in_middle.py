"""Lost-in-the-middle reordering (Liu et al., "Lost in the Middle: How Language Models Use
Long Contexts", TACL 2024): language models use the start and the end of a long context
best, so the best hits go to both ends and the weakest to the middle.

Input ranks 1, 2, 3, 4, 5 come out as 1, 3, 5, 4, 2. It runs on the final ``top_k`` (a
``final`` post-processor), after the cut, so it changes the order only, never the set.
"""

from __future__ import annotations

from ragspine_core.records import Hit


def lost_in_middle_order(n: int) -> list[int]:
    """Indices for ``n`` ranked items: odd ranks ascending at the front, even ranks descending at the back."""
    return list(range(0, n, 2)) + list(range(1, n, 2))[::-1]


class LostInMiddlePostProcessor:
    final = True
    describe = "best at both ends"

    def __call__(self, query: str, hits: list[Hit]) -> list[Hit]:
        return [hits[i] for i in lost_in_middle_order(len(hits))]
