"""RAGSpine core: the contract and kernels both sides share (schema, records, errors,
settings, text, lexical, dense, the graph file format, net, runtime). No policy, no Dagster;
imports nothing of the other RAGSpine packages."""
