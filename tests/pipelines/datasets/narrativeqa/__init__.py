"""Tests of pipelines/datasets/narrativeqa/."""
