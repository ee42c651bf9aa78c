"""One module per pipeline step, named after its asset (``pipeline.STEPS`` lists them)."""
