#!/usr/bin/env bash
# Regenerates the Python gRPC stubs from their .proto files: the kubelet's PodResources API
# (toposched/exporter/podresources/_generated/api.proto, the exporter's client), its device
# plugin API (testkit/deviceplugin/_generated/api.proto, the test kit's device plugin) and its DRA
# plugin and plugin registration APIs (testkit/dra/_generated/{dra,registration}.proto, the test
# kit's DRA driver).
# The generated files are committed (so installing toposched needs no protoc); unit tests fail
# when they no longer match their .proto. Needs grpcio-tools (in the dev extra).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-.}
for proto in toposched/exporter/podresources/_generated/api.proto testkit/deviceplugin/_generated/api.proto \
  testkit/dra/_generated/dra.proto testkit/dra/_generated/registration.proto; do
  "${PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I . \
    --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "$proto"
done
