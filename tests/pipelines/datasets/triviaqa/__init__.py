"""Tests of pipelines/datasets/triviaqa/."""
