"""The named studies: one short file per study, each a grid, probe settings and default plots."""
