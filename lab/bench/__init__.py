"""The engine side of the `tandem` command: `train`, `eval model`, `bench engines` (`cli`,
`bench`) and `demo`. Each command imports its module only when it runs."""
