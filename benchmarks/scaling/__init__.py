"""scale.py's parts (run it as ``python benchmarks/scale.py``): the run and the steps on the queue
(``steps``), the dead-letter steps (``dead_letters``), and the emulator process and RSS sampler a
step is measured with (``process``)."""
