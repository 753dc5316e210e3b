"""Target kinds: where PostgreSQL runs for one column of a comparison, behind
one interface (``pgrig.targets.base.TargetKind``), listed in
``pgrig.registry.TARGET_KINDS``; docs/targets.md."""
