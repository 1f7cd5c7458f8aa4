"""The chaos soak's parts (run it as ``python benchmarks/chaos_soak.py``): the broker it kills and
restarts (``broker``), the figures it prints (``figures``), what the kit reported per message
(``ledger``) and one round of kit operations (``rounds``)."""
