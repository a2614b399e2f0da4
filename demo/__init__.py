"""Demo: synthetic HotpotQA data and the end-to-end run (python -m demo.run)."""
