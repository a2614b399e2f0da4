"""The ``readtwice`` console command (:mod:`readtwice.__main__`)."""
