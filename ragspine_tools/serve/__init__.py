"""Serving published libraries: ``ragspine serve`` (HTTP, :mod:`.app`), ``ragspine mcp`` (:mod:`.mcp_server`),
both over :class:`.service.SearchService` with the access rules of :mod:`.access`. Needs the ``serve`` extra."""
