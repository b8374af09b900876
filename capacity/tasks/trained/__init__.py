"""The trained task: one-layer models on continuous MQAR (``model``), trained beside the probe's ceilings (``task``)."""
