"""The mqar task: multi-query associative recall measured directly on a memory (``probe.mqar``), zoology's generator."""
