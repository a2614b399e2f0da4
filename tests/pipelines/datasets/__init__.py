"""Tests of pipelines/datasets/: one folder per dataset."""
