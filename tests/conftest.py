"""Test-session settings, applied before any test module imports a library."""

import os

# gRPC's C core logs at INFO when a loopback server (the Cloud NL fake, Beam's own runner)
# closes its connections ("Got goaway"): noise in the test output, not a finding.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
