"""The `tandem` command (`cli`) and its router-side subcommands (`commands`, `doctor`, `serve`,
`bench_serve`), and `start_app` (`local_app`): one local app for tests and benchmarks."""
