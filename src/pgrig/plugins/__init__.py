"""pgrig's own parts that are not a workload or a target kind, registered as
plug-ins through the same ``pgrig.plugins`` entry points a third-party package
uses (pyproject.toml): the storage probes, the monitor's record, the storage
lab's records and the host executors. Each module declares its ``PARTS``
(``registry.Parts``), which the registry reads when the entry point loads;
nothing imports these modules but the entry points (and tests)."""
