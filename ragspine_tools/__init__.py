"""RAGSpine tools: the ``ragspine`` command, evaluation (``ragspine eval``) and benchmarks."""
