"""From a library's files to validated documents.

* :mod:`.model` — the document model (:class:`~.model.SourceDocument`,
  :class:`~.model.ParseResult`); it imports nothing of chunking or parsing.
* :mod:`.library` — :func:`~.library.parse_library`: walk a library folder and parse
  every file (the rules, in its docstring).
* :mod:`.text_files` (``.md``/``.markdown``/``.txt``) with :mod:`.front_matter` (the
  front-matter grammar), and :mod:`.jsonl` (one document per line, parsed in worker
  processes when the file is large).
* :mod:`.sensitivity` — the sensitivity check (markings in metadata and first lines);
  :mod:`.keys` — the key rules; :mod:`.metadata` — validation and defaults, where the
  sensitivity decision is taken; :mod:`.folding` and :mod:`.encoding` — helpers.

Named ``source_documents`` (not ``documents``) while :mod:`..documents` is the documents
step's module. Import from the modules themselves; this package ``__init__`` imports
nothing, so a module here can be imported without loading the rest.
"""
