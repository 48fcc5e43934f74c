"""``brain mcp``: the memory as a Model Context Protocol server over stdio.

Another front end over the same engine and the same handlers as the NDJSON
daemon: each tool call, resource read and prompt becomes a request that the
daemon's dispatcher (``daemon.dispatch``) validates, runs and maps, so the
params checks, the error codes and the redaction of paths are the daemon's own.
Needs the ``mcp`` extra (the official SDK: ``pip install '.[mcp]'`` in a clone; what
``brain mcp`` prints without it is ``daemon.commands.MCP_MISSING``).

- ``calls``: a method and params in, a result or a typed wire error out, through the dispatcher;
- ``tools``: the ``memory_*`` tools (schemas, annotations, output schemas) and how the
  pinned session fills their params;
- ``resources`` and ``prompts``: the ``brain://`` resources and the prompts;
- ``app``: the SDK server holding all of it;
- ``transport``: MCP frames over the daemon's own stdin source and stdout sink;
- ``runner``: the process's life (engine, background work, signals, bounded stop).

Tests: tests/e2e/test_mcp.py (the SDK's own stdio client against ``brain mcp``),
tests/e2e/test_mcp_lifecycle.py (EOF, SIGTERM, kill -9, a shared database, over raw
pipes) and tests/daemon/mcp/test_tools.py (how the pin scopes each tool).
"""
