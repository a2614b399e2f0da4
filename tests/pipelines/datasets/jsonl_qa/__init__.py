"""Tests of pipelines/datasets/jsonl_qa/."""
