"""Where a library's documents come from: the folder walk and the symbolic-link policy
(:mod:`.walk`), and file names made printable on one line (:mod:`.paths`).

Import from the modules themselves; this package ``__init__`` imports nothing.
"""
