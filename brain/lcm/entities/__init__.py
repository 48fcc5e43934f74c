"""The entity index: names, identifiers, quantities and dates the messages mention
(``extract``), written at ingest and backfilled (``index``), looked up by name
(``lookup``) and shared between a query and its candidates (``overlap``)."""
