"""Test kit of hvd-runner."""
