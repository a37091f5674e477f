"""The offline lab: what makes the model and the router.

- `lab.model`: the task suite and the tiny model's training and evaluation;
- `lab.routing`: the router's data set, training, label agreement and retraining from the log;
- `lab.layout`: the house's rooms drawn from the code's imports.

The `tandem` command and every benchmark (`tandem/`) stand above it; the request path (`router/`,
`engines/`, `policies/`) never imports either."""
