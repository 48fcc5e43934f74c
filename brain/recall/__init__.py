"""Recall: ``grep`` over messages, summaries and payload files, and ``expand_query``."""
