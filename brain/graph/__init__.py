"""The learned graph: nodes and edges, spreading activation, the fast loop (query, teach,
learn), traces, workspace sync and the slow maintain loop."""
