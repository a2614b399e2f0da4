"""Tests of pipelines/datasets/hotpotqa/."""
