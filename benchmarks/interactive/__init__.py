"""interactive_latency.py's parts (run it as ``python benchmarks/interactive_latency.py``): the calls
timed at each latency (``calls``), Tab completion (``completion``) and %sb_copy against export +
import (``copying``)."""
