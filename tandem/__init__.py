"""The `tandem` command and what it measures, above everything else in the house.

- `tandem.main`: the command's parser; `tandem serve`, `tandem doctor`, `tandem policy`, `tandem demo`
  (`serve`, `doctor`, `policy`, `demo`) and the lab's commands (`commands`, `engines`: train,
  evaluate, label, retrain);
- `tandem.local_app`: one local app for `tandem serve`, tests and benchmarks (`start_app`);
- `tandem.bench`: every benchmark (engines, prefix cache, shapes, verified, serve, chaos, structured).

Nothing on the request path (`router/`, `engines/`, `policies/`) or in the lab (`lab/`) imports it."""
