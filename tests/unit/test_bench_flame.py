"""The flame graphs' arithmetic: py-spy's collapsed stacks, shares by path, graphs rooted at a handler."""

from collections import Counter

import pytest

from bench.flame import rooted, shares, stacks, svg

RAW = """\
<module> (x.py:1);run (a.py:2);Extender.filter (server.py:40);evaluate (evaluate.py:237) 6
<module> (x.py:1);run (a.py:2);Extender.bind (server.py:70);Binder._post (binding.py:150) 3
<module> (x.py:1);run (a.py:2);EpollSelector.select (selectors.py:468) 10
<module> (x.py:1);run (a.py:2);SSLProtocol._do_handshake (sslproto.py:1) 1
not a stack line
"""


def test_collapsed_stacks_keep_functions_and_counts() -> None:
    sampled = stacks(RAW)
    assert sampled[("<module>", "run", "Extender.filter", "evaluate")] == 6
    assert sum(sampled.values()) == 20


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        pytest.param("filter", 0.3, id="filter"),
        pytest.param("placement (evaluate)", 0.3, id="evaluate-inside-filter"),
        pytest.param("bind", 0.15, id="bind"),
        pytest.param("binding call to the apiserver", 0.15, id="api-call"),
        pytest.param("TLS handshakes", 0.05, id="handshakes"),
        pytest.param("prioritize", 0.0, id="absent"),
    ],
)
def test_shares_are_fractions_of_all_samples(share: str, expected: float) -> None:
    assert shares(stacks(RAW))[share] == expected


def test_a_graph_rooted_at_a_handler_starts_there() -> None:
    assert rooted(stacks(RAW), "Extender.bind") == Counter({("Extender.bind", "Binder._post"): 3})


def test_the_svg_draws_each_frame_with_its_share() -> None:
    drawn = svg(Counter({("a", "b"): 3, ("a", "c"): 1}), "t <1>")
    assert drawn.startswith("<svg")
    assert drawn.endswith("</svg>")
    assert "t &lt;1&gt; (4 samples)" in drawn
    assert "<title>a (4 samples, 100.0%)</title>" in drawn
    assert "<title>b (3 samples, 75.0%)</title>" in drawn
