"""The gateway: the HTTP faces (`ingress` for OpenAI chat and completions, `responses_api` for
the Responses API, `admin`, `console`), the orchestration of one request (`orchestration`), its
failover (`failover`), its typed answer (`replies`, `answer_parts`), answers in OpenAI's format and
tool calls (`answers`, `tool_calls`, `structured`, `schemas`),
and what is recorded of it (`telemetry`, `decisions_log`, `decision_feed`)."""
