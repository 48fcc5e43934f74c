"""Lossless context memory: messages and their content, ingest, the context list, the
summary DAG, summarizing and compaction, assembling and rendering, describe, suppress, bootstrap."""
