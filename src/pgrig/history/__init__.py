"""A series of studies (one campaign run again): each point's figure over
time (``series``), where it changed (``changes``), what differed in the
environment around the change (``cause``), and the gate a CI job acts on
(``gate``). Reads the store only; never measures."""

# How many of a series' last accepted studies make its baseline (``pgrig check
# --baseline-studies``); here, not in ``gate``, so that ``--help`` reads it
# without loading the store and the registry.
ACCEPTED = 5
