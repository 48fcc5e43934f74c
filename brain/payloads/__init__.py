"""Payload files: their durable storage, the text ``files_fts`` indexes, and the
structure summaries ``describe`` shows. Below lcm and recall, which both read them."""
