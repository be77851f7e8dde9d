#!/usr/bin/env bash
# Regenerates the PodResources Python stubs from toposched/exporter/podresources/_generated/api.proto.
# The generated files are committed (so installing toposched needs no protoc); a unit test
# fails when they no longer match the .proto. Needs grpcio-tools (in the dev extra).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-.}
"${PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I . \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  toposched/exporter/podresources/_generated/api.proto
