"""The model task: a real hybrid model's linear-attention heads measured on a text (``task``: settings and protocol;
``source``: the model and text, checked, and their digest; ``heads``: what is measured of one captured layer; ``figures``: its figures, of the figures layer)."""
