"""Notebook and headless-lab helpers: the main job now; charts, widgets and sweeps as the labs grow."""
