"""An example pgrig plug-in (tests/plugin_example): ``type = "example"`` counts
rows on each target, ``kind = "scratch"`` is a throwaway cluster in a
directory that carries a label, and the report gains an "Example counts"
section and an ``example`` conclusion. pgrig finds it through the
``pgrig.plugins`` entry points in pyproject.toml."""
