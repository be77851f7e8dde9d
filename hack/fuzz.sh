#!/usr/bin/env bash
# A long fuzz campaign of the offline commands (explain, netcost, nrt, order): bounded random
# mutations of real inputs, each case under a timeout, on every core. Prints per command the
# cases run, exit statuses, tracebacks, hangs and unclear messages, with a case that shows each
# problem found; exits non-zero when there is any.
#
#   hack/fuzz.sh                              100,000 cases per command
#   hack/fuzz.sh --cases 1000 --command nrt   one command, fewer cases
#   hack/fuzz.sh --seed 7                     other cases (a case is a function of seed and index)
#
# make test runs a few hundred cases per command (tests/unit/test_fuzz.py; TOPOSCHED_FUZZ_CASES
# raises that count).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
exec "$repo/.venv/bin/python" -m testkit.fuzz "$@"
