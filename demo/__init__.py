"""Demo: the end-to-end run on generated HotpotQA data (``python -m demo.run``, ``make demo``)."""
