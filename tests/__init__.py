"""Tests mirror the packages: tests/pipelines, tests/model, tests/evaluation, tests/schemas."""
