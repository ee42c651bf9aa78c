"""How many calls of pure delegation sit between ``ragspine query`` and a retrieval channel.

Issue #24 asks that the CLI reach a channel through at most three calls of project code
that add nothing but delegation (the query side used to be an onion of wrappers, each
re-declaring ``search``/``run`` and forwarding to the next).

Definition used here, measured on a real ``ragspine query`` call (``cli.main``) with
``sys.setprofile``:

* the **path** is the chain of project frames (functions defined in any of the floors,
  ``ragspine_core`` … ``ragspine_tools``) from the CLI's ``run_query`` to the first call of a channel's
  ``search`` (a channel of :mod:`ragspine_query.pipeline.channels`), each frame's
  parent being its nearest project caller (calls through the standard library, e.g. a
  ``contextlib`` ``with`` block, are looked through);
* a frame on the path, strictly between ``run_query`` and the channel's ``search``, is
  **delegation-only** when, over its whole lifetime, the only project function it called
  was the next frame on the path, once. Its own work is then at most argument shuffling
  and calls into Python or third-party code (no validation, no tracing, no ranking, no
  result assembly through project code): it only hands the query on.

A stage loop that calls several stages, a retriever that builds a mask before its
channels, a snippet builder that builds snippets: none of those is delegation-only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ragspine_query.pipeline.channels as channels_module
from ragspine_tools import query_command as cli

REPO = Path(cli.__file__).resolve().parents[1]
#: every floor of the project (the CLI is in ragspine_tools, the channels in ragspine_query)
PROJECT_DIRS = tuple(str(REPO / p) + "/" for p in ("ragspine_core", "ragspine_index", "ragspine_assets", "ragspine_query",
                                                  "ragspine_tools", "ragspine_assets"))
CHANNELS_FILE = str(Path(channels_module.__file__).resolve())
MAX_DELEGATION = 3


class _Node:
    __slots__ = ("code", "parent", "children")

    def __init__(self, code, parent):
        self.code, self.parent, self.children = code, parent, []


def _is_project(code) -> bool:
    return code.co_filename.startswith(PROJECT_DIRS)


def trace_cli(argv: list[str]) -> tuple[list[_Node], int]:
    """Run ``cli.main(argv)`` under a profiler; return the path from ``run_query`` to the
    first channel ``search`` (outermost first) and the exit code."""
    nodes: dict[int, _Node] = {}  # id(frame) -> node, while the frame runs
    path: list[_Node] = []

    def nearest(frame):
        f = frame.f_back
        while f is not None:
            node = nodes.get(id(f))
            if node is not None:
                return node
            f = f.f_back
        return None

    def profile(frame, event, arg):
        if event == "call" and _is_project(frame.f_code):
            parent = nearest(frame)
            node = _Node(frame.f_code, parent)
            nodes[id(frame)] = node
            if parent is not None:
                parent.children.append(node)
            if not path and frame.f_code.co_name == "search" and frame.f_code.co_filename == CHANNELS_FILE:
                chain, n = [], node
                while n is not None:
                    chain.append(n)
                    if n.code.co_name == "run_query":
                        break
                    n = n.parent
                path.extend(reversed(chain))
        elif event == "return":
            nodes.pop(id(frame), None)

    sys.setprofile(profile)
    try:
        rc = cli.main(argv)
    finally:
        sys.setprofile(None)
    return path, rc


def delegation_only(path: list[_Node]) -> list[str]:
    """The delegation-only frames of ``path`` (see the module docstring), as ``file:function``."""
    out = []
    for node, nxt in zip(path[1:-1], path[2:]):
        if len(node.children) == 1 and node.children[0] is nxt:
            out.append(f"{Path(node.code.co_filename).name}:{node.code.co_qualname}")
    return out


def test_cli_reaches_a_channel_through_at_most_three_delegation_only_calls(tmp_path_factory, monkeypatch, capsys):
    from tests.query.qi_library import shared_sample

    for var in ("RAGSPINE_RERANKER", "RAGSPINE_QUERY_CACHE", "RAGSPINE_CORRECTIVE", "RAGSPINE_TIERS", "RAGSPINE_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    lib = shared_sample(tmp_path_factory)
    path, rc = trace_cli(["query", str(lib), "Acme China revenue", "--top-k", "3"])
    assert rc == 0 and "[1]" in capsys.readouterr().out
    assert path and path[0].code.co_name == "run_query" and path[-1].code.co_name == "search", "no channel was reached from run_query"
    shown = " -> ".join(f"{Path(n.code.co_filename).name}:{n.code.co_qualname}" for n in path)
    only = delegation_only(path)
    print(f"{len(only)} delegation-only call(s) {only} on the path {shown}")  # shown with pytest -s
    assert len(only) <= MAX_DELEGATION, f"{len(only)} delegation-only calls {only} on the path {shown}"


def test_the_count_sees_a_pure_forwarder(tmp_path_factory, monkeypatch, capsys):
    """The measure can fail: a wrapper that only forwards ``search`` is counted."""
    from tests.query.qi_library import shared_sample
    from ragspine_query.agent_api import NarrativeIndexRetriever

    class Forward:
        def __init__(self, inner):
            self.inner = inner

        def search(self, query, **kw):
            return self.inner.search(query, **kw)

    original = NarrativeIndexRetriever.__init__

    def wrapped(self, index, **kw):
        for _ in range(MAX_DELEGATION + 1):
            index = Forward(index)
        original(self, index, **kw)

    lib = shared_sample(tmp_path_factory)
    monkeypatch.setattr(NarrativeIndexRetriever, "__init__", wrapped)
    monkeypatch.setattr(sys.modules[__name__], "PROJECT_DIRS", PROJECT_DIRS + (str(Path(__file__).resolve()),))
    path, rc = trace_cli(["query", str(lib), "Acme China revenue", "--top-k", "3"])
    assert rc == 0
    capsys.readouterr()
    assert len([n for n in delegation_only(path) if "Forward.search" in n]) == MAX_DELEGATION + 1
