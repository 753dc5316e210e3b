"""Target kinds: where PostgreSQL runs for one column of a comparison, behind
one interface (``pgrig.registry.target.TargetKind``), listed in
``pgrig.registry.target_kinds()``; docs/targets.md."""
