"""Model runtimes shared by the embedding backends and the rerankers."""
