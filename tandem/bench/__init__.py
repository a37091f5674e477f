"""Every benchmark, each a `tandem bench ...` command (or `python -m tandem.bench.NAME`), and the structured
evaluation (`tandem eval structured`). A benchmark runs its competitors side by side in one run. Each command
imports its module only when it runs."""
