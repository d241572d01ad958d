"""evalhub's knobs and their defaults: the one place both ``evalhub/settings.py`` (which overlays
the environment) and ``evalhub.conf`` (which falls back to them) read.

Plain data, no Django: the schedule arithmetic may import it too.
"""

from __future__ import annotations

from typing import Any

#: The reference's schedule seed (``DEFAULT_SEED`` of the reference schedule script).
SCHEDULE_SEED = "runner-live-seven-week-v1"
#: The reference's campaign cost ceiling in USD when none is configured.
MAX_CAMPAIGN_COST_USD = "12"

#: The secret key of the embedded, single-machine default (evalhub/settings.py); a shared or
#: production deployment on it is refused (evalhub/checks.py, evalhub.E008).
EMBEDDED_SECRET_KEY = "evalhub-embedded-default-key"
#: Host names that reach only this machine: the default ALLOWED_HOSTS.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "testserver")

DEFAULTS: dict[str, Any] = {
    "SCHEDULE_SEED": SCHEDULE_SEED,
    # Kept as the raw string: parse_campaign_cost_limit validates it when a run starts.
    "MAX_CAMPAIGN_COST_USD": None,
    "NIGHTLY_TIME_UTC": "04:00",
    # Executors that start processes or reach the network are switched on here.
    "EXECUTORS": {},
    # Alerts fire only once the baseline is declared ready (and seven compatible reports exist).
    "BASELINE_READY": False,
    # Runs older than this many days are pruned daily, never the last seven reports of a bundle.
    "RETENTION_DAYS": 120,
    # Part of the live bundle identity; evalhub's version when unset.
    "RUNNER_BUILD": None,
    # Live executions. Model providers by qualification profile: where the runtime sends model
    # requests, which wire API, and the *name* of the variable holding the key (never the key).
    # A candidate without a profile uses DEFAULT_PROVIDER_PROFILES[provider]. EVALHUB_MODEL_PROVIDERS
    # (a JSON object of the same shape) overrides or adds profiles; `manage.py check` validates it.
    "MODEL_PROVIDERS": {
        "openai": {"base_url": "https://api.openai.com/v1", "wire_api": "responses", "env_key": "OPENAI_API_KEY"},
        "openrouter": {"base_url": "https://openrouter.ai/api/v1", "wire_api": "chat", "env_key": "OPENROUTER_API_KEY"},
        # Anthropic's API root (Claude Code appends /v1/messages).
        "anthropic": {"base_url": "https://api.anthropic.com", "wire_api": "messages", "env_key": "ANTHROPIC_API_KEY"},
    },
    "MODEL_PROVIDERS_JSON": "",
    # An acpx candidate's qualification.profile names its ACP agent (claude, codex), not a model
    # provider: "acpx:<agent>" gives the agent's model provider profile, "acpx" the fallback.
    "DEFAULT_PROVIDER_PROFILES": {
        "codex": "openai",
        "opencode": "openrouter",
        "acpx": "openai",
        "acpx:claude": "anthropic",
        "acpx:codex": "openai",
    },
    # Runtime executables by runs.executors.live.runtimes key; unset: node_modules/.bin (make install).
    "RUNTIME_BINARIES": {},
    # The only host variables a runtime inherits, besides the candidate's required variables.
    "RUNTIME_ENV_ALLOWLIST": ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR"],
    # Raw protocol traces are kept compressed, up to this many uncompressed bytes per attempt.
    "TRACE_CAP_BYTES": 8 * 1024 * 1024,
    # Orchestration. An execution is held under a lease the heartbeat extends; the reaper takes
    # back one whose lease expired (its worker died). Seconds.
    "LEASE_SECONDS": 60,
    "HEARTBEAT_SECONDS": 20,
    # A worker looks for expired leases after a task at most this often (one query; the periodic
    # reaper runs every minute besides). Seconds.
    "REAP_CHECK_SECONDS": 10,
    # How long bookkeeping writes are retried through a database outage before giving up.
    "DB_RETRY_SECONDS": 120,
    # A pending execution of a run nothing has touched for this long is put on the queue again
    # (a broker that lost its task).
    "REDISPATCH_SECONDS": 600,
    # Concurrent executions per model provider profile, e.g. {"openai": 2}; a profile not named
    # here has no limit.
    "PROVIDER_CONCURRENCY": {},
    # How long a queued execution waits for a provider slot before it is put back on the queue.
    "SLOT_WAIT_SECONDS": 30,
    # What "every workflow case covers every slot" asks of the week (docs/DESIGN.md, coverage):
    # "every" slot (the reference's invariant; a catalog of more than 14 slots is refused, a case
    # meets two slots a night), or the "reachable" ones: min(slots, 14) distinct slots a week.
    "COVERAGE_CASE_SLOTS": "every",
    # Alert delivery: a failed notification is retried after this many seconds, doubled each
    # time, up to NOTIFY_MAX_ATTEMPTS attempts in all.
    "NOTIFY_RETRY_SECONDS": 60,
    "NOTIFY_MAX_ATTEMPTS": 5,
    # Where people reach evalhub (e.g. https://evalhub.example.com): notifications link to run
    # pages under it; unset, they carry the page's path only.
    "PUBLIC_URL": "",
    # Signal across nights (docs/signal.md): a case × candidate's last SIGNAL_RECENT_NIGHTS scored
    # nights of one bundle against the SIGNAL_BASELINE_NIGHTS before them, by an exact one-sided
    # test at level SIGNAL_ALPHA. With three repetitions a night these defaults find a drop from
    # 0.9 to 0.4 more than four times in five, while a stable case raises a false regression at
    # most 5% of the time.
    "SIGNAL_RECENT_NIGHTS": 3,
    "SIGNAL_BASELINE_NIGHTS": 6,
    "SIGNAL_ALPHA": 0.05,
}
