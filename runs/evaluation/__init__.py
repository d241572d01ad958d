"""The pure evaluation core: the observation schema, scoring, reports, renderings and exports.

Plain functions over plain data (docs/STYLE.md rule 3): nothing here imports ``django.db``, reads the
clock or the environment; ``runs.reporting`` loads rows, calls these and saves.
"""
