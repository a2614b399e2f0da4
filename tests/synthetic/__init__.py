"""Tests of synthetic/."""
