"""The Jupyter lab on top of labformat: workshop helpers, charts, sweeps, widgets, exercises and the headless main job."""
