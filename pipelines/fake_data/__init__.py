"""Generated text for the datasets' fake inputs (each dataset folder's ``fake_input.py``, its
spec's ``fake_input``): deterministic pseudo-prose whose word frequencies follow Zipf's law, so
that BPE's word cache hits about as often as on real text.  The benchmarks, ``--estimate``'s
calibration (``python -m benchmarks job_cost``), the demo and the tests write their inputs with
it; no run of a job reads it."""
