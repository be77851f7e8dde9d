"""YAML reading against mutated and random text: documents, or one line naming the file."""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fuzz import YAML_SPLICES, mutate_text, one_line, parse_error
from testkit.paths import EXAMPLES
from toposched.localfiles import load_yaml

TEXTS = [path.read_text() for path in sorted(EXAMPLES.glob("*.yaml"))]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(TEXTS), st.randoms(use_true_random=False), st.integers(1, 4))
def test_mutated_manifests(text: str, rng: object, rounds: int) -> None:
    for _ in range(rounds):
        text, _ = mutate_text(text, rng)  # type: ignore[arg-type]
    error = parse_error(lambda: load_yaml(text, "f.yaml"))
    assert error is None or (one_line(error) and error.startswith("f.yaml: "))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=20) | st.sampled_from(YAML_SPLICES), max_size=12).map("".join))
def test_random_text(text: str) -> None:
    error = parse_error(lambda: load_yaml(text, "f.yaml"))
    assert error is None or (one_line(error) and error.startswith("f.yaml: "))
    if error is None:  # what loads is what the same PyYAML loader makes of it (libyaml's and the
        # pure-Python scanner differ on a few inputs, such as a tab after a scalar)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        assert load_yaml(text, "f.yaml") == [d for d in yaml.load_all(text, Loader=loader) if d is not None]
