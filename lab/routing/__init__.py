"""Offline work on the router (never imported by the request path): the routing data set
(`dataset`), the scikit-learn pipelines and their fitting (`fit`, `train`), reading the decisions
log back for retraining (`decisions`) and the router benchmark (`bench`)."""
