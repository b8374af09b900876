"""The mqar task: multi-query associative recall measured directly on a memory (``probe``, the public
``lacapacity.mqar``), zoology's own generator (``zoology``, re-exported by ``probe``), the task on the protocol (``task``)."""
