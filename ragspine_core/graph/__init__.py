"""The relation graph's file format and stores, shared by the builder and the reader."""
