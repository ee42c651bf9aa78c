"""A toy extension registered from outside the core (``ragspine query --plugin tests.query.toy_plugins``).

* channel ``toy``: ranks the rows whose chunk text contains ``TOY_WORD`` (row order);
* post-processor ``toy_post``: tags every hit with ``scores["toy_post"] = 1.0``.
"""

from __future__ import annotations

import numpy as np

from ragspine_query.pipeline import register_channel, register_postprocessor

TOY_WORD = "battery"


class WordChannel:
    name = "toy"

    def __init__(self, library, word: str) -> None:
        rows = [int(r[0]) for r in library.execute_read("SELECT row_idx, text FROM narrative_chunk ORDER BY row_idx")
                if word.lower() in str(r[1]).lower()]
        self.rows = np.asarray(rows, dtype=np.int64)

    def search(self, query, depth, allowed):
        rows = self.rows if allowed is None else self.rows[allowed[self.rows]]
        rows = rows[:depth]
        return rows, np.ones(rows.shape[0], dtype=np.float32)


def toy_channel_factory(ctx):
    return WordChannel(ctx.library, TOY_WORD)


def toy_post(query, hits):
    return [h.with_score(h.score, toy_post=1.0) for h in hits]


def register() -> None:
    register_channel("toy", toy_channel_factory, replace=True)
    register_postprocessor("toy_post", toy_post, replace=True)


register()
