"""Tests of pipelines/datasets/books/."""
