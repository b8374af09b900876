"""The needle task: needles among n haystack tokens, read after them (``probe.needle``)."""
