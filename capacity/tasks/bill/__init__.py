"""The bill task: measured state or cache size and per-token decode time after n writes."""
