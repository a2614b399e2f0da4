"""Tests of pipelines/inspector/."""
