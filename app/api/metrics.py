"""``GET /metrics``: Prometheus text from the server's counters and the engine's stats."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api.request_log import RequestRecord
from engine import EngineStats


@dataclass
class ServerCounters:
    """Totals since the server started (event-loop thread only)."""

    requests: dict[tuple[str, int], int] = field(default_factory=dict)  # (path, status) -> count
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0

    def count(self, record: RequestRecord) -> None:
        key = (record.path, record.status)
        self.requests[key] = self.requests.get(key, 0) + 1
        self.prompt_tokens += record.prompt_tokens
        self.cached_tokens += record.cached_tokens
        self.completion_tokens += record.completion_tokens


Sample = tuple[str, float]  # labels ("" or '{a="b"}'), value


def _metric(lines: list[str], name: str, kind: str, help_text: str, samples: list[Sample]) -> None:
    lines.append(f"# HELP hearth_{name} {help_text}")
    lines.append(f"# TYPE hearth_{name} {kind}")
    for labels, value in samples:
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        lines.append(f"hearth_{name}{labels} {shown}")


def render(counters: ServerCounters, stats: EngineStats | None) -> str:
    lines: list[str] = []
    requests = [
        (f'{{path="{path}",status="{status}"}}', n) for (path, status), n in sorted(counters.requests.items())
    ]
    _metric(lines, "requests_total", "counter", "API requests answered, by path and HTTP status.", requests)
    rows: list[tuple[str, str, str, float]] = [
        ("requests_in_flight", "gauge", "API requests being served now.", counters.in_flight),
        ("prompt_tokens_total", "counter", "Prompt tokens of API requests.", counters.prompt_tokens),
        (
            "prompt_cached_tokens_total",
            "counter",
            "API prompt tokens from the prefix cache.",
            counters.cached_tokens,
        ),
        (
            "completion_tokens_total",
            "counter",
            "Tokens generated for API requests.",
            counters.completion_tokens,
        ),
    ]
    if stats is not None:
        rows += _engine_rows(stats)
    for name, kind, help_text, value in rows:
        _metric(lines, name, kind, help_text, [("", value)])
    return "\n".join(lines) + "\n"


def _engine_rows(s: EngineStats) -> list[tuple[str, str, str, float]]:
    """The whole engine: API requests and the window's conversations together."""
    usage = s.cells_used / s.n_ctx if s.n_ctx else 0.0
    return [
        ("queue_depth", "gauge", "Requests waiting for a sequence.", s.queue_depth),
        ("active_requests", "gauge", "Requests holding a sequence.", s.active_requests),
        ("kv_cells_used", "gauge", "KV cache cells in use.", s.cells_used),
        ("kv_cells", "gauge", "KV cache cells in all.", s.n_ctx),
        ("kv_cache_usage_ratio", "gauge", "KV cache cells in use / all cells.", float(usage)),
        ("prefix_cache_hits_total", "counter", "Requests that reused a cached prefix.", s.prefix_hits),
        ("prefix_cache_misses_total", "counter", "Requests that found no cached prefix.", s.prefix_misses),
        (
            "prefix_cache_tokens_reused_total",
            "counter",
            "Prompt tokens from the prefix cache.",
            s.tokens_reused,
        ),
        ("engine_requests_completed_total", "counter", "Requests the engine finished.", s.completed_requests),
        (
            "decode_tokens_per_second",
            "gauge",
            "Decode rows per second, recently.",
            float(s.decode_tokens_per_second),
        ),
        (
            "prefill_tokens_per_second",
            "gauge",
            "Prompt tokens per second, recently.",
            float(s.prefill_tokens_per_second),
        ),
        (
            "batch_fill_ratio",
            "gauge",
            "Sequences per recent batch / parallel sequences.",
            float(s.batch_fill),
        ),
    ]
