"""Lossless context memory: messages and their content, ingest, the context list, the
summary DAG, the tool call/result pairing rule, summarizing and compaction, assembling and
rendering, describe, suppress, bootstrap."""
