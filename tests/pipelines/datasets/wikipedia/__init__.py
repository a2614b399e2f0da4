"""Tests of pipelines/datasets/wikipedia/."""
