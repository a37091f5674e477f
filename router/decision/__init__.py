"""The routing decision: request features (`features`), the learned classifier and length
predictor (`classifier`), engine health and live costs (`engine_health`, `live_costs`), the
routing view that prices each mode (`routing_view`), and `Router.decide` (`decide`), which turns
a prediction and the live policy into a `Decision` (`types`). Refusals are `errors`."""
