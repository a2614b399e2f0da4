"""Tests of the task registry and the task modules of :mod:`model.tasks`."""
