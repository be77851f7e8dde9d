"""The netperf measurement ConfigMap: key format and parsing, shared by the prober and the operator.

Key format (upstream): ``netperf.<pct>.latency.milliseconds.origin.<node>.destination.<node>``
with an integer number of milliseconds, ``<pct>`` one of p50, p90, p99. The prober also writes
``netperf.timestamp.origin.<node>.destination.<node>`` (RFC 3339) so stale pairs can be told.
Node names may contain dots, so a key is split where both sides are known nodes.
"""

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

PERCENTILES = ("p50", "p90", "p99")
MAX_LATENCY_MS = 60_000
"""Anything above a minute is a broken measurement, not a network."""

_LATENCY = re.compile(r"^netperf\.(p\d+)\.latency\.milliseconds\.origin\.(.+)$")
_TIMESTAMP = re.compile(r"^netperf\.timestamp\.origin\.(.+)$")
_OLD_FORMAT = re.compile(r"^netperf_p\d+_latency_microseconds\.")
_SEPARATOR = ".destination."


def latency_key(percentile: str, origin: str, destination: str) -> str:
    return f"netperf.{percentile}.latency.milliseconds.origin.{origin}{_SEPARATOR}{destination}"


def timestamp_key(origin: str, destination: str) -> str:
    return f"netperf.timestamp.origin.{origin}{_SEPARATOR}{destination}"


@dataclass
class Measurements:
    latency_ms: dict[tuple[str, str], int] = field(default_factory=dict)
    """Latency of the chosen percentile per (origin node, destination node)."""
    measured_at: dict[tuple[str, str], datetime] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)
    """Offending key -> why it was ignored."""
    unknown_nodes: set[str] = field(default_factory=set)


def split_pair(rest: str, nodes: Collection[str]) -> tuple[str, str] | None:
    """Split ``<origin>.destination.<destination>``, preferring a split where both are known nodes."""
    candidates = []
    start = 0
    while (i := rest.find(_SEPARATOR, start)) != -1:
        candidates.append((rest[:i], rest[i + len(_SEPARATOR) :]))
        start = i + 1
    for origin, destination in candidates:
        if origin in nodes and destination in nodes:
            return origin, destination
    return candidates[0] if len(candidates) == 1 and all(candidates[0]) else None


def parse(data: Mapping[str, str], percentile: str, nodes: Collection[str]) -> Measurements:
    """The measurements of ``percentile`` among ``nodes``; everything else is reported, not guessed."""
    nodes = frozenset(nodes)
    out = Measurements()
    for key, raw in data.items():
        if _OLD_FORMAT.match(key):
            out.malformed[key] = "old microsecond key format; expected netperf.<pct>.latency.milliseconds.*"
            continue
        if m := _TIMESTAMP.match(key):
            pair = split_pair(m.group(1), nodes)
            try:
                stamp = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
            except ValueError:
                out.malformed[key] = f"not an RFC 3339 time: {_short(raw)}"
                continue
            if pair is not None and stamp.tzinfo is not None:
                out.measured_at[pair] = stamp
            continue
        m = _LATENCY.match(key)
        if m is None:
            if key.startswith("netperf"):
                out.malformed[key] = "unrecognised netperf key"
            continue  # other keys belong to someone else
        if m.group(1) not in PERCENTILES:
            out.malformed[key] = f"unknown percentile {m.group(1)!r} (expected one of {', '.join(PERCENTILES)})"
            continue
        if m.group(1) != percentile:
            continue
        pair = split_pair(m.group(2), nodes)
        if pair is None:
            out.malformed[key] = "cannot tell origin from destination"
            continue
        unknown = [n for n in pair if n not in nodes]
        if unknown:
            out.unknown_nodes.update(unknown)
            out.malformed[key] = f"unknown node {', '.join(unknown)}"
            continue
        if pair[0] == pair[1]:
            out.malformed[key] = "origin and destination are the same node"
            continue
        text = raw.strip()
        if not re.fullmatch(r"[0-9]+", text):  # ASCII digits: int() would also take "١٢"
            out.malformed[key] = f"not a whole number of milliseconds: {_short(raw)}"
            continue
        digits = text.lstrip("0") or "0"  # int() refuses thousands of digits, leading zeros included
        if len(digits) > len(str(MAX_LATENCY_MS)) or int(digits) > MAX_LATENCY_MS:
            shown = text if len(text) <= 40 else f"{text[:12]}... ({len(text)} digits)"
            out.malformed[key] = f"{shown} ms is not a plausible latency (limit {MAX_LATENCY_MS} ms)"
            continue
        value = int(digits)
        out.latency_ms[pair] = value
    return out


def _short(text: str, limit: int = 40) -> str:
    """A value as a message quotes it: garbage can be megabytes long."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"
