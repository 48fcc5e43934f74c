"""Providers: the resilient HTTP poster and the OpenAI-compatible chat client."""
