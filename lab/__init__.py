"""The offline lab: everything that is not on the request path.

- `lab.model`: the task suite and the tiny model's training and evaluation;
- `lab.routing`: the router's data set, training, label agreement and retraining from the log;
- `lab.bench`: every benchmark (engines, prefix cache, shapes, verified, serve, chaos, structured);
- `lab.cli`: the `tandem` command, `tandem serve`, `tandem doctor`, and `start_app` for tests.

The request path (`router/`, `engines/`, `policies/`) never imports this package."""
