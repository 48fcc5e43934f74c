"""Vectors: the embedders, the embed queue and the vector index with its hot matrix,
and the IVF index."""
