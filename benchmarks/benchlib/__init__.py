"""What only the measurement scripts in ``benchmarks/`` use (not part of albertkit).

Each script puts its own folder first on ``sys.path``, so ``import benchlib`` works from
any working directory.
"""
