"""The store: the SQLite connection and its transactions, the schema and its migrations,
opening files a request names, and the embedder identity recorded in the database."""
