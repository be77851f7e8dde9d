package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const driver = "gpu.example.com"

func slice(name, node, pool string, devices ...string) map[string]any {
	list := make([]map[string]any, 0, len(devices))
	for _, d := range devices {
		list = append(list, map[string]any{"name": d})
	}
	return map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"driver": driver, "nodeName": node, "devices": list,
			"pool": map[string]any{"name": pool, "generation": 1, "resourceSliceCount": 1},
		},
	}
}

func claim(count int) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u"},
		"spec": map[string]any{"devices": map[string]any{"requests": []any{map[string]any{
			"name":    "gpu",
			"exactly": map[string]any{"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count},
		}}}},
	}
}

// heldClaim is ns/held, allocated gpu-0 of pool p1.
func heldClaim() map[string]any {
	held := claim(1)
	held["metadata"] = map[string]any{"name": "held", "namespace": "ns"}
	held["status"] = map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{
		map[string]any{"request": "gpu", "driver": driver, "pool": "p1", "device": "gpu-0"},
	}}}}
	return held
}

var class = map[string]any{
	"metadata": map[string]any{"name": "gpu"},
	"spec":     map[string]any{"selectors": []any{map[string]any{"cel": map[string]any{"expression": `device.driver == "gpu.example.com"`}}}},
}

// run feeds the lines to serve and returns its answers.
func run(t *testing.T, gates string, lines ...any) []answer {
	t.Helper()
	var in bytes.Buffer
	for _, line := range lines {
		if text, ok := line.(string); ok {
			in.WriteString(text + "\n")
			continue
		}
		encoded, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(encoded, '\n'))
	}
	features, err := parseFeatures(gates)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := serve(&in, &out, newState(features)); err != nil {
		t.Fatal(err)
	}
	var answers []answer
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		answers = append(answers, a)
	}
	return answers
}

func put(kind string, object any) map[string]any {
	return map[string]any{"op": "put", "kind": kind, "object": object}
}

func picked(a nodeAnswer) string {
	if a.Error != "" || a.Unsuitable {
		return fmt.Sprintf("unsuitable=%v error=%q", a.Unsuitable, a.Error)
	}
	var got []string
	for _, d := range a.Devices {
		got = append(got, fmt.Sprintf("%v/%v", d[3], d[4]))
	}
	return strings.Join(got, ",")
}

func TestThePickIsTheAllocatorsFirstFit(t *testing.T) {
	node := map[string]any{"metadata": map[string]any{"name": "n1"}}
	for _, tc := range []struct {
		name    string
		count   int
		assumed []assumed
		want    string
	}{
		{"pools-by-name-slices-by-name", 1, nil, "a-pool/gpu-2"},
		{"an-assumed-device-is-taken", 1, []assumed{{Driver: driver, Pool: "a-pool", Device: "gpu-2"}}, "a-pool/gpu-3"},
		{"across-pools-in-order", 3, nil, "a-pool/gpu-2,a-pool/gpu-3,b-pool/gpu-0"},
		{"more-than-the-node-has", 5, nil, "unsuitable=true error=\"\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := run(t, "",
				put("DeviceClass", class),
				put("ResourceSlice", slice("s1", "n1", "b-pool", "gpu-0", "gpu-1")),
				put("ResourceSlice", slice("s2", "n1", "a-pool", "gpu-2", "gpu-3")),
				map[string]any{"op": "allocate", "id": 7, "claims": []any{claim(tc.count)}, "nodes": []any{node}, "assumed": tc.assumed},
			)
			last := answers[len(answers)-1]
			if last.ID != 7 || picked(last.Nodes["n1"]) != tc.want {
				t.Fatalf("got %+v, want %s", last, tc.want)
			}
		})
	}
}

func TestBadLinesAreAnsweredAndSkipped(t *testing.T) {
	answers := run(t, "",
		"not json",
		map[string]any{"op": "bogus", "id": 3},
		put("Widget", map[string]any{}),
		put("ResourceSlice", map[string]any{"spec": "not a spec"}),
		put("DeviceClass", class),
		put("ResourceSlice", slice("s1", "n1", "p", "gpu-0")),
		map[string]any{"op": "allocate", "id": 4, "claims": []any{claim(1)}, "nodes": []any{map[string]any{"metadata": map[string]any{"name": "n1"}}, "not a node"}},
	)
	if len(answers) != 5 {
		t.Fatalf("want 4 errors and 1 allocation, got %+v", answers)
	}
	for _, a := range answers[:4] {
		if a.Error == "" {
			t.Fatalf("a bad line without an error: %+v", a)
		}
	}
	if got := picked(answers[4].Nodes["n1"]); got != "p/gpu-0" {
		t.Fatalf("the good objects still count: got %s", got)
	}
	if answers[4].Nodes["#1"].Error == "" {
		t.Fatalf("a bad node is said to be one: %+v", answers[4].Nodes)
	}
}

func TestFeatureGates(t *testing.T) {
	if _, err := parseFeatures("DRAConsumableCapacity=false,DRAListTypeAttributes=true"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"DRAConsumableCapacity", "NotAGate=true", "DRAAdminAccess=maybe"} {
		if _, err := parseFeatures(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// TestAnswersAreKeptWhileTheNodeDoesNotChange: a node's answer is reused for the same claims until
// its slices, its allocated devices or the assumed ones change, and only that node's.
func TestAnswersAreKeptWhileTheNodeDoesNotChange(t *testing.T) {
	nodes := []any{map[string]any{"metadata": map[string]any{"name": "n1"}}, map[string]any{"metadata": map[string]any{"name": "n2"}}}
	ask := func(id int, assumed ...assumed) map[string]any {
		return map[string]any{"op": "allocate", "id": id, "claims": []any{claim(1)}, "nodes": nodes, "assumed": assumed}
	}
	held := heldClaim()
	answers := run(t, "",
		put("DeviceClass", class),
		put("ResourceSlice", slice("s1", "n1", "p1", "gpu-0", "gpu-1")),
		put("ResourceSlice", slice("s2", "n2", "p2", "gpu-0", "gpu-1")),
		ask(1),
		ask(2),
		put("ResourceClaim", held),
		ask(3),
		ask(4, assumed{Driver: driver, Pool: "p2", Device: "gpu-0"}),
		map[string]any{"op": "delete", "kind": "ResourceClaim", "name": "ns/held"},
		ask(5),
		put("ResourceSlice", slice("s1", "n1", "p1", "gpu-1")),
		ask(6),
	)
	want := []string{"p1/gpu-0 p2/gpu-0", "p1/gpu-0 p2/gpu-0", "p1/gpu-1 p2/gpu-0", "p1/gpu-1 p2/gpu-1", "p1/gpu-0 p2/gpu-0", "p1/gpu-1 p2/gpu-0"}
	for i, a := range answers {
		if got := picked(a.Nodes["n1"]) + " " + picked(a.Nodes["n2"]); got != want[i] {
			t.Fatalf("request %d: got %s, want %s", a.ID, got, want[i])
		}
	}
}

func TestNodesByNameAlone(t *testing.T) {
	answers := run(t, "",
		put("DeviceClass", class),
		put("ResourceSlice", slice("s1", "n1", "p1", "gpu-0")),
		map[string]any{"op": "allocate", "id": 1, "claims": []any{claim(1)}, "nodeNames": []string{"n1", "n2"}},
	)
	if got := picked(answers[0].Nodes["n1"]) + " " + picked(answers[0].Nodes["n2"]); got != `p1/gpu-0 unsuitable=true error=""` {
		t.Fatalf("got %s", got)
	}
}

func TestDeltaAnswersNameOnlyTheNodesThatChanged(t *testing.T) {
	ask := func(id int, have ...string) map[string]any {
		return map[string]any{"op": "allocate", "id": id, "claims": []any{claim(1)}, "nodeNames": []string{"n1", "n2"}, "delta": true, "have": have}
	}
	held := heldClaim()
	first := run(t, "",
		put("DeviceClass", class),
		put("ResourceSlice", slice("s1", "n1", "p1", "gpu-0", "gpu-1")),
		put("ResourceSlice", slice("s2", "n2", "p2", "gpu-0", "gpu-1")),
		ask(1),
	)
	shape := first[0].Shape
	answers := run(t, "",
		put("DeviceClass", class),
		put("ResourceSlice", slice("s1", "n1", "p1", "gpu-0", "gpu-1")),
		put("ResourceSlice", slice("s2", "n2", "p2", "gpu-0", "gpu-1")),
		ask(1),
		ask(2, shape),
		put("ResourceClaim", held),
		ask(3, shape),
		ask(4), // the caller no longer holds the shape: everything again
	)
	changed := func(a answer) string {
		names := make([]string, 0, len(a.Changed))
		for name, raw := range a.Changed {
			var n nodeAnswer
			if err := json.Unmarshal(raw, &n); err != nil {
				t.Fatal(err)
			}
			names = append(names, name+"="+picked(n))
		}
		slices.Sort(names)
		return fmt.Sprintf("delta=%v %s", a.Delta, strings.Join(names, " "))
	}
	want := []string{"delta=false n1=p1/gpu-0 n2=p2/gpu-0", "delta=true ", "delta=true n1=p1/gpu-1", "delta=false n1=p1/gpu-1 n2=p2/gpu-0"}
	for i, a := range answers {
		if a.Shape != shape {
			t.Fatalf("request %d: shape %q, want %q", a.ID, a.Shape, shape)
		}
		if got := changed(a); got != want[i] {
			t.Fatalf("request %d: got %q, want %q", a.ID, got, want[i])
		}
	}
}
