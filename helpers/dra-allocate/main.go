// Command toposched-dra-allocate answers, for a pod's ResourceClaims and some nodes, which devices
// kube-scheduler's DynamicResources plugin would allocate on each node. It links the allocator the
// scheduler links (k8s.io/dynamic-resource-allocation at the scheduler's version) and builds it the
// way the plugin's PreFilter does, so the pick is the scheduler's by construction; what it cannot
// see is the scheduler's own in-flight allocations, which the caller passes as assumed devices.
//
// It reads one JSON request per line on stdin and answers "allocate" requests with one JSON line on
// stdout, in order:
//
//	{"op": "put", "kind": "ResourceSlice" | "DeviceClass" | "ResourceClaim", "object": {...}}
//	{"op": "delete", "kind": "...", "name": "<name or namespace/name>"}
//	{"op": "allocate", "id": 1, "claims": [...], "nodeNames": ["n1", ...], "nodes": [...],
//	 "assumed": [{"driver": ..., "pool": ..., "device": ...}], "timeoutMillis": 1000, "full": false}
//
// Nodes are named ("nodeNames"), or sent whole ("nodes") where their labels select slices. The
// answer maps each node to the devices picked ([claim index, request, driver, pool, device]),
// "unsuitable" or an "error", with the whole allocation results when "full" is asked.
//
// A line it cannot read is answered with {"error": "..."} and skipped: one bad object never stops
// the others.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	gates := flag.String("feature-gates", "", "kube-scheduler's DRA feature gates, as it is given them (Name=true,...)")
	flag.Parse()
	features, err := parseFeatures(*gates)
	if err != nil {
		fmt.Fprintf(os.Stderr, "toposched-dra-allocate: %v\n", err)
		os.Exit(2)
	}
	if err := serve(os.Stdin, os.Stdout, newState(features)); err != nil {
		fmt.Fprintf(os.Stderr, "toposched-dra-allocate: %v\n", err)
		os.Exit(1)
	}
}

// serve handles requests until the input ends.
func serve(in io.Reader, out io.Writer, state *state) error {
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriter(out)
	encoder := json.NewEncoder(writer)
	for {
		line, err := reader.ReadBytes('\n')
		if len(line) > 0 {
			if answer := state.handle(line); answer != nil {
				if err := encoder.Encode(answer); err != nil {
					return err
				}
				if err := writer.Flush(); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
