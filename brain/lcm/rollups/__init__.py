"""Time rollups: a day's and a week's leaf summaries of one session key (or session)
condensed into one derived node, and ``recent``, what a time window holds."""
