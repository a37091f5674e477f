"""Every benchmark, each a `tandem bench ...` command (or `python -m tandem.bench.NAME`): each runs its
competitors side by side in one run and prints their ratios. Each command imports its module only when it runs."""
