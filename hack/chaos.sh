#!/usr/bin/env bash
# A long fault run (testkit/chaos): on a control plane of its own, real kubelet and kwok nodes with
# their exporters, the operators and the extender with a real kube-scheduler take a steady pod
# stream while faults from a seeded schedule hit them; it ends with one line of figures.
#
#   hack/chaos.sh                          20 minutes, seed 1
#   hack/chaos.sh --minutes 5 --seed 7 --json chaos.json
#   hack/chaos.sh --help                   every option
#
# Root (real nodes) and the node tools (make test-tools). Logs in .cluster/chaos/runs/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "chaos: real kubelet nodes need root" >&2; exit 2; }
"$repo/hack/build-binaries.sh" >/dev/null
cd "$repo"
exec "$repo/.venv/bin/python" -m testkit.chaos "$@"
