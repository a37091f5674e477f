"""The decisions log: one Redis stream entry per routed request, the data the router retrains on.

Stream `<prefix>decisions` (`tandem:decisions`). What an entry holds is set by
`DecisionsLogSettings` (the app's `decisions_log:` arguments). Fields, all strings:

- `v`         entry format version ("2"; "1" entries, from before, stored the whole request)
- `ts`        unix seconds when it was logged
- `features`  JSON, no prompt text: `numeric` (the router's numeric feature vector, by name, as
              `router.decision.features` computes it), sizes (`prompt_tokens`, `prompt_chars`, `messages`,
              `tools`, `tools_bytes`, `schema_bytes`, `stop`), `response_format` (its type),
              `max_tokens`, `model`, `feature_version`
- `decision`  JSON: the Decision (mode, task, confidence, predicted_tokens, policy_version, ...)
- `outcome`   JSON: what happened: `output_tokens`, `finish_reason`, `latency_ms`,
              `accepted`/`drafted` (verified mode), and optionally a reviewed `task` label
- `text`      only with `store_text: true`: JSON `messages` (role and text of each; other content
              parts are not kept), `tools`, `response_format`, `stop`, cut to fit
              `max_entry_bytes`; `cut` says what was cut (below)
- `cum`       bookkeeping of the byte cap (below)

Prompt text is off by default: a security review found an SSN, an email and a card number
stored as sent. Retraining reads text, so it needs `store_text: true`; entries without it are
counted and skipped (`tandem router train --from-redis` says how many).

**Per entry.** An entry never exceeds `max_entry_bytes` (the UTF-8 bytes of its field names and
values; `cum`'s 30 or so bytes aside). Text is cut in this order until it fits: tool definitions
to their names (the router reads only how many there are), a `response_format` to its type (the
router reads only that), then every message, and each stop sequence, to a head and a tail of at
most `limit_chars` characters joined by " ... " (halved until it fits; the router's own text
features read the first 800 and last 300 characters of the last user message). `text.cut` records
each cut: `{"tools": {"bytes": n, "kept": "names"}, "response_format": {"bytes": n, "kept":
"type"}, "messages": {"limit_chars": n, "chars_cut": n}}`. If even that does not fit, `text` is
only `{"cut": {"all": {"bytes": n}}}`.

**Stream.** One Lua script (atomic, so replicas never race) appends the entry and trims oldest
first, exactly (no `~`), for three limits:

- age: `XTRIM MINID` at the new entry's id minus `ttl_s` (stream ids are Redis's clock in ms),
  so an entry goes with the first write after it turns `ttl_s` old; and `PEXPIRE ttl_s` on the
  stream, so one that stops being written goes whole `ttl_s` after its last write;
- count: `XTRIM MAXLEN max_entries`;
- bytes: an entry of n bytes weighs `n + n/4 + 256` (`entry_weight`), an upper bound of Redis's
  memory for it: `MEMORY USAGE` of streams of 100 to 1,000 entries measured 1.15-1.28 x the
  entry bytes (listpack nodes, allocator rounding), 0.83-0.96 x the weight (Redis 7.0, default
  `stream-node-max-bytes`), plus about 1.5 KB for the stream itself. Each entry carries `cum`, the
  running total of weights through it (kept in the hash `<stream>:acct`, which also names the
  oldest entry counted, `first`), so the entries from e to the newest weigh
  `cum(newest) - cum(e) + weight(e)`. The script walks from the oldest counted entry and trims
  up to the first one whose span fits `max_bytes`. That holds whatever else trimmed the stream
  (age, count, a hand-run XTRIM), keeps no running total that could drift, and reads about one
  entry per write.

Entries from before this format ("1") carry no `cum`: age and count trim them, bytes do not
(`DEL` the stream to drop them at once). Needs Redis 6.2 (XTRIM MINID).

`log_decision` never raises: when Redis is down it returns False and counts the drop in `stats`.
Reading it back is offline work (`lab/routing/decisions.py`): `read_decisions` pages through
the stream; `to_training_record` turns an entry with text into a data-set line (task label: the outcome's reviewed `task` if present, else the router's own
prediction when it was confident - a pseudo-label; length: the outcome's `output_tokens`, which
like the data set's labels is already capped by max_tokens).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from router.gateway.decision_entry import compact_json, cut_text, stored_features, utf8_bytes

log = logging.getLogger("tandem.router.decisions")

STREAM = "tandem:decisions"
FORMAT_VERSION = "2"
PSEUDO_LABEL_MIN_CONFIDENCE = 0.9
MIN_ENTRY_BYTES = 4096  # an entry without text (features, decision, outcome) takes about 1.2 KB
ENTRY_OVERHEAD = 256  # bytes of Redis memory per entry beyond n/4 (see entry_weight)
CUM_RESERVE = 32  # the `cum` field the script adds: "cum" + up to 20 digits, outside the count
MAX_ID_CHARS = 128  # a client-chosen x-request-id is kept to this many characters


class DecisionsLogSettings(BaseModel):
    """What the decisions log stores and how long (the app's `decisions_log:` arguments)."""

    model_config = ConfigDict(extra="forbid")
    store_text: bool = Field(
        False, description="Also store the prompt text (messages, tools, response_format, stop), cut to max_entry_bytes. "
        "Off: entries hold the numeric features, sizes, decision and outcome only; retraining from the log needs it on."
    )
    max_entry_bytes: int = Field(
        16 * 1024, ge=MIN_ENTRY_BYTES, le=1024 * 1024,
        description=f"Most bytes one entry holds (field names and values), {MIN_ENTRY_BYTES} to 1048576; text beyond is cut, and the entry says what.",
    )
    max_entries: int = Field(100_000, ge=1, description="Most entries the stream keeps (at least 1); the oldest go first.")
    max_bytes: int = Field(
        64 * 1024 * 1024, ge=MIN_ENTRY_BYTES,
        description="Most bytes of Redis memory the stream takes, as entry_weight estimates it (an entry of n bytes: n + n/4 + 256), "
        "at least the weight of one max_entry_bytes entry; the oldest go first.",
    )
    ttl_s: float = Field(
        7 * 86400.0, ge=1.0, description="Seconds an entry is kept (at least 1; default 7 days); a stream without writes for this long expires whole."
    )

    @model_validator(mode="after")
    def _one_entry_fits(self) -> DecisionsLogSettings:
        if self.max_bytes < entry_weight(self.max_entry_bytes):
            raise ValueError(f"max_bytes must be at least {entry_weight(self.max_entry_bytes)} (the weight of one entry of "
                             f"max_entry_bytes={self.max_entry_bytes}); got {self.max_bytes}")
        return self


@dataclass
class LogStats:
    """Counters of the writer (plain attributes; metrics exporters read them)."""

    written: int = 0
    dropped: int = 0  # entries lost because Redis failed (or, never expected, one would not fit)
    text_cut: int = 0  # entries whose opt-in text was cut to fit max_entry_bytes
    last_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


stats = LogStats()


# ---- an entry and its weight -------------------------------------------------------------------------

def entry_bytes(fields: dict[str, str]) -> int:
    """Bytes of an entry as the caps count them: UTF-8 field names and values."""
    return sum(utf8_bytes(k) + utf8_bytes(v) for k, v in fields.items())


def entry_weight(nbytes: int) -> int:
    """What an entry of `nbytes` (as `entry_bytes` counts) costs against `max_bytes`: an upper
    bound of Redis's memory for it, measured (module docstring). The Lua script uses the same."""
    return nbytes + nbytes // 4 + ENTRY_OVERHEAD


def entry_fields(request: dict, decision: dict, outcome: dict, settings: DecisionsLogSettings) -> dict[str, str]:
    """The fields of one stream entry (without `cum`), within `settings.max_entry_bytes`."""
    decision = dict(decision)
    if isinstance(decision.get("request_id"), str):
        decision["request_id"] = decision["request_id"][:MAX_ID_CHARS]
    fields = {
        "v": FORMAT_VERSION,
        "ts": f"{time.time():.3f}",
        "features": compact_json(stored_features(request)),
        "decision": compact_json(decision),
        "outcome": compact_json(outcome),
    }
    if settings.store_text:
        budget = settings.max_entry_bytes - entry_bytes(fields) - utf8_bytes("text") - CUM_RESERVE
        text, was_cut = cut_text(request, budget)
        fields["text"] = compact_json(text)
        if was_cut:
            with stats._lock:
                stats.text_cut += 1
    n = entry_bytes(fields) + CUM_RESERVE
    if n > settings.max_entry_bytes:  # text is cut to fit, and the rest is bounded well below MIN_ENTRY_BYTES
        raise ValueError(f"entry is {n} bytes, max_entry_bytes is {settings.max_entry_bytes}")
    return fields


# ---- the writer -----------------------------------------------------------------------------------------

# KEYS[1] the stream, KEYS[2] its accounting hash (cum, first).
# ARGV[1] max_entries, ARGV[2] max_bytes, ARGV[3] ttl in ms, ARGV[4] ENTRY_OVERHEAD,
# ARGV[5..] the entry's field, value pairs. Returns the new entry's id.
_APPEND_AND_TRIM = """
local stream, acct = KEYS[1], KEYS[2]
local max_entries, max_bytes, ttl_ms, overhead = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function weight(n) return n + math.floor(n / 4) + overhead end
local size, fields = 0, {}
for i = 5, #ARGV do size = size + #ARGV[i]; fields[#fields + 1] = ARGV[i] end
local fresh = redis.call('EXISTS', stream) == 0
local cum = weight(size)
local first = false
if not fresh then
  cum = cum + tonumber(redis.call('HGET', acct, 'cum') or '0')
  first = redis.call('HGET', acct, 'first')
end
fields[#fields + 1] = 'cum'
fields[#fields + 1] = string.format('%d', cum)
local id = redis.call('XADD', stream, '*', unpack(fields))
if not first then first = id end
local ms = tonumber(string.match(id, '^(%d+)'))
if ms > ttl_ms then redis.call('XTRIM', stream, 'MINID', string.format('%d-0', ms - ttl_ms)) end
redis.call('XTRIM', stream, 'MAXLEN', max_entries)
local start, walked = first, 0
while true do
  local row = redis.call('XRANGE', stream, start, '+', 'COUNT', 1)[1]
  if not row then first = id; break end
  local c, s = nil, 0
  local f = row[2]
  for i = 1, #f, 2 do
    if f[i] == 'cum' then c = tonumber(f[i + 1]) else s = s + #f[i] + #f[i + 1] end
  end
  if c and cum - c + weight(s) <= max_bytes then first = row[1]; break end
  walked = walked + 1
  start = '(' .. row[1]
end
if walked > 0 then redis.call('XTRIM', stream, 'MINID', first) end
redis.call('HSET', acct, 'cum', string.format('%d', cum), 'first', first)
redis.call('PEXPIRE', stream, ttl_ms)
redis.call('PEXPIRE', acct, ttl_ms)
return id
"""


def log_decision(redis_client, features: dict, decision: dict, outcome: dict, settings: DecisionsLogSettings | None = None,
                 stream: str = STREAM) -> bool:
    """Append one entry for `features` (`request_features(route)`), trimming the stream to
    `settings` (default: no text, 7 days, 100,000 entries, 64 MiB). Returns False, counting the
    drop, if anything fails."""
    settings = settings or DecisionsLogSettings()
    try:
        fields = entry_fields(features, decision, outcome, settings)
        args = [settings.max_entries, settings.max_bytes, max(1, math.ceil(settings.ttl_s * 1000)), ENTRY_OVERHEAD]
        args += [x for kv in fields.items() for x in kv]
        redis_client.register_script(_APPEND_AND_TRIM)(keys=[stream, f"{stream}:acct"], args=args)
    except Exception as exc:  # a logging path must never break serving
        with stats._lock:
            stats.dropped += 1
            first = stats.last_error is None
            stats.last_error = f"{type(exc).__name__}: {exc}"
        if first or stats.dropped % 1000 == 0:
            log.warning("decision log to %s failed (%d dropped so far): %s", stream, stats.dropped, stats.last_error)
        return False
    with stats._lock:
        stats.written += 1
        stats.last_error = None
    return True
