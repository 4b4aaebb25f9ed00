"""SageMaker integration: request building and submission (job.py), container side (entrypoint.py)."""
