"""Testing support shipped with the package, used only by the test suite and
``tools/fuzz.py``, never by the compiler: ``random_graphs`` generates random
valid graphs and runs them fused, unfused and scheduled against the
interpreter."""
