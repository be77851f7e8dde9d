package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// request is one line of input.
type request struct {
	Op            string            `json:"op"`
	ID            int64             `json:"id"`
	Kind          string            `json:"kind"`
	Name          string            `json:"name"`
	Object        json.RawMessage   `json:"object"`
	Claims        []json.RawMessage `json:"claims"`
	Nodes         []json.RawMessage `json:"nodes"`
	NodeNames     []string          `json:"nodeNames"`
	Assumed       []assumed         `json:"assumed"`
	TimeoutMillis int64             `json:"timeoutMillis"`
	Full          bool              `json:"full"`
	// Delta asks for the nodes whose answer changed since the last delta answer for the same
	// claims, as long as the caller still holds that answer (its shape is in Have).
	Delta bool     `json:"delta"`
	Have  []string `json:"have"`
}

// assumed is a device the caller knows to be taken although no claim's status says so yet.
type assumed struct {
	Driver           string                                          `json:"driver"`
	Pool             string                                          `json:"pool"`
	Device           string                                          `json:"device"`
	ShareID          *types.UID                                      `json:"shareID,omitempty"`
	ConsumedCapacity map[resourceapi.QualifiedName]resource.Quantity `json:"consumedCapacity,omitempty"`
}

// nodeAnswer is what the allocator said for one node: the devices it picks, none (the claims do
// not fit), or an error (a claim or class the allocator cannot evaluate). Devices are
// [claim index, request, driver, pool, device]; the whole allocation results when asked ("full").
type nodeAnswer struct {
	Devices    [][]any                        `json:"devices,omitempty"`
	Allocation []resourceapi.AllocationResult `json:"allocation,omitempty"`
	Unsuitable bool                           `json:"unsuitable,omitempty"`
	Error      string                         `json:"error,omitempty"`
}

type answer struct {
	ID    int64                 `json:"id"`
	Nodes map[string]nodeAnswer `json:"nodes,omitempty"`
	Error string                `json:"error,omitempty"`
	// Shape, Changed and Delta answer a delta request: the nodes whose answer changed for this
	// shape of claims; Delta false: every node asked, the caller forgets what it held of the shape.
	Shape   string                     `json:"shape,omitempty"`
	Changed map[string]json.RawMessage `json:"changed,omitempty"`
	Delta   bool                       `json:"delta,omitempty"`
}

type state struct {
	features structured.Features
	slices   map[string]*resourceapi.ResourceSlice
	classes  map[string]*resourceapi.DeviceClass
	claims   map[string]*resourceapi.ResourceClaim
	celCache *cel.Cache
	kept     *memory
	sent     *sent
}

func newState(features structured.Features) *state {
	return &state{
		features: features,
		slices:   map[string]*resourceapi.ResourceSlice{},
		classes:  map[string]*resourceapi.DeviceClass{},
		claims:   map[string]*resourceapi.ResourceClaim{},
		celCache: cel.NewCache(1000, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity}),
		kept:     newMemory(),
		sent:     newSent(),
	}
}

// handle applies one request; it returns an answer for "allocate" and for a request it cannot read.
func (s *state) handle(line []byte) *answer {
	var r request
	if err := json.Unmarshal(line, &r); err != nil {
		return &answer{Error: fmt.Sprintf("not a request: %v", err)}
	}
	var err error
	switch r.Op {
	case "put":
		err = s.put(r.Kind, r.Object)
	case "delete":
		err = s.remove(r.Kind, r.Name)
	case "allocate":
		return s.allocate(r)
	default:
		err = fmt.Errorf("unknown op %q", r.Op)
	}
	if err != nil {
		return &answer{ID: r.ID, Error: err.Error()}
	}
	return nil
}

func (s *state) put(kind string, raw json.RawMessage) error {
	switch kind {
	case "ResourceSlice":
		slice, err := read[resourceapi.ResourceSlice](raw, func(o *resourceapi.ResourceSlice) string { return o.Name })
		if err == nil {
			s.kept.sliceChanged(s.slices[slice.Name], slice)
			s.slices[slice.Name] = slice
		}
		return err
	case "DeviceClass":
		class, err := read[resourceapi.DeviceClass](raw, func(o *resourceapi.DeviceClass) string { return o.Name })
		if err == nil {
			s.kept.forgetAll()
			s.classes[class.Name] = class
		}
		return err
	case "ResourceClaim":
		claim, err := read[resourceapi.ResourceClaim](raw, claimKey)
		if err == nil {
			defaultClaim(claim)
			s.kept.claimChanged(s.claims[claimKey(claim)], claim)
			s.claims[claimKey(claim)] = claim
		}
		return err
	}
	return fmt.Errorf("unknown kind %q", kind)
}

func claimKey(claim *resourceapi.ResourceClaim) string { return claim.Namespace + "/" + claim.Name }

func read[T any](raw json.RawMessage, key func(*T) string) (*T, error) {
	object := new(T)
	if err := json.Unmarshal(raw, object); err != nil {
		return nil, fmt.Errorf("not readable: %v", err)
	}
	if name := key(object); name == "" || name == "/" {
		return nil, errors.New("an object without a name")
	}
	return object, nil
}

func (s *state) remove(kind, name string) error {
	switch kind {
	case "ResourceSlice":
		s.kept.sliceChanged(s.slices[name], nil)
		delete(s.slices, name)
	case "DeviceClass":
		s.kept.forgetAll()
		delete(s.classes, name)
	case "ResourceClaim":
		s.kept.claimChanged(s.claims[name], nil)
		delete(s.claims, name)
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	return nil
}

// allocate builds one allocator for the pod's claims, as the plugin's PreFilter does, and asks it
// about each node, as its Filter does (answers kept from earlier requests stand where valid).
func (s *state) allocate(r request) *answer {
	claims := make([]*resourceapi.ResourceClaim, 0, len(r.Claims))
	for i, raw := range r.Claims {
		claim := new(resourceapi.ResourceClaim)
		if err := json.Unmarshal(raw, claim); err != nil {
			return &answer{ID: r.ID, Error: fmt.Sprintf("claim #%d: not readable: %v", i, err)}
		}
		defaultClaim(claim)
		claims = append(claims, claim)
	}
	shape := fingerprint(claims, r.Full)
	assumedOn := s.kept.byNode(r.Assumed)
	nodes := readNodes(r)
	answers := make([]nodeAnswer, len(nodes))
	numbers := make([]uint64, len(nodes)) // 0: an answer not kept
	var todo []int
	for i, n := range nodes {
		switch found, number, ok := s.kept.get(shape, n.name, assumedOn[n.name]+"\x00"+n.sent); {
		case n.node == nil:
			answers[i] = nodeAnswer{Error: "not a node"}
		case ok:
			answers[i], numbers[i] = found, number
		default:
			todo = append(todo, i)
		}
	}
	if len(todo) > 0 {
		allocator, err := s.allocator(r.Assumed)
		if err != nil {
			return &answer{ID: r.ID, Error: err.Error()}
		}
		timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 10 * time.Second // the scheduler's DRASchedulerFilterTimeout
		}
		parallel(len(todo), func(k int) {
			answers[todo[k]] = s.allocateOn(allocator, nodes[todo[k]].node, claims, timeout, r.Full)
		})
		for _, i := range todo {
			numbers[i] = s.kept.keep(shape, nodes[i].name, assumedOn[nodes[i].name]+"\x00"+nodes[i].sent, answers[i])
		}
	}
	if r.Delta {
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.name
		}
		name := shapeName(shape)
		changed, delta, err := s.sent.changed(name, holds(r.Have, name), names, answers, numbers)
		if err != nil {
			return &answer{ID: r.ID, Error: err.Error()}
		}
		return &answer{ID: r.ID, Shape: name, Changed: changed, Delta: delta}
	}
	out := answer{ID: r.ID, Nodes: make(map[string]nodeAnswer, len(nodes))}
	for i, n := range nodes {
		out.Nodes[n.name] = answers[i]
	}
	return &out
}

// nodeRef is a node a request asks about: by name alone ("nodeNames") or as an object ("nodes",
// whose labels can select slices: the node as sent is part of what its answer is kept for).
type nodeRef struct {
	name, sent string
	node       *v1.Node // nil: not a node
}

func readNodes(r request) []nodeRef {
	refs := make([]nodeRef, 0, len(r.NodeNames)+len(r.Nodes))
	for _, name := range r.NodeNames {
		refs = append(refs, nodeRef{name: name, node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}})
	}
	for i, raw := range r.Nodes {
		node := new(v1.Node)
		if err := json.Unmarshal(raw, node); err != nil || node.Name == "" {
			refs = append(refs, nodeRef{name: fmt.Sprintf("#%d", i)})
			continue
		}
		refs = append(refs, nodeRef{name: node.Name, sent: string(raw), node: node})
	}
	return refs
}

// parallel runs work(0..n-1) on every core: the scheduler's Filter allocates on many nodes at once
// too (Allocate is safe for concurrent use).
func parallel(n int, work func(int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				work(k)
			}
		}()
	}
	wg.Wait()
}

// allocator builds the allocator the plugin's PreFilter builds.
func (s *state) allocator(extra []assumed) (structured.Allocator, error) {
	sliceList := make([]*resourceapi.ResourceSlice, 0, len(s.slices))
	for _, name := range sortedKeys(s.slices) {
		sliceList = append(sliceList, s.slices[name])
	}
	return structured.NewAllocator(context.Background(), s.features, s.allocatedState(extra), classLister(s.classes), sliceList, s.celCache)
}

func (s *state) allocateOn(allocator structured.Allocator, node *v1.Node, claims []*resourceapi.ResourceClaim, timeout time.Duration, full bool) nodeAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results, err := allocator.Allocate(ctx, node, claims)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nodeAnswer{Error: fmt.Sprintf("node %s: timed out trying to allocate devices", node.Name)}
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return nodeAnswer{Unsuitable: true, Error: err.Error()}
	case err != nil:
		return nodeAnswer{Error: err.Error()}
	case len(results) != len(claims):
		return nodeAnswer{Unsuitable: true}
	}
	picked := nodeAnswer{}
	for c, result := range results {
		for _, d := range result.Devices.Results {
			picked.Devices = append(picked.Devices, []any{c, d.Request, d.Driver, d.Pool, d.Device})
		}
	}
	if full {
		picked.Allocation = results
	}
	return picked
}

// allocatedState is what every claim's status has allocated, plus the caller's assumed devices:
// dedicated devices, and under consumable capacity the shared ones with what they consume.
func (s *state) allocatedState(extra []assumed) structured.AllocatedState {
	allocated := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	take := func(driver, pool, device string, share *types.UID, consumed map[resourceapi.QualifiedName]resource.Quantity) {
		id := structured.MakeDeviceID(driver, pool, device)
		if s.features.ConsumableCapacity && share != nil {
			allocated.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, share))
			if consumed != nil {
				allocated.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, consumed))
			}
			return
		}
		allocated.AllocatedDevices.Insert(id)
	}
	for _, claim := range s.claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.AdminAccess != nil && *result.AdminAccess {
				continue // admin access takes no device away from others
			}
			take(result.Driver, result.Pool, result.Device, result.ShareID, result.ConsumedCapacity)
		}
	}
	for _, a := range extra {
		take(a.Driver, a.Pool, a.Device, a.ShareID, a.ConsumedCapacity)
	}
	return allocated
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, name := range sortedKeys(l) {
		out = append(out, l[name])
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseFeatures gives kube-scheduler 1.36's defaults, changed by gates given as it is given them.
func parseFeatures(gates string) (structured.Features, error) {
	enabled := map[string]bool{
		"DRAAdminAccess":               true,
		"DRAPrioritizedList":           true,
		"DRAPartitionableDevices":      true,
		"DRADeviceTaints":              true,
		"DRADeviceBindingConditions":   true,
		"DRAResourceClaimDeviceStatus": true,
		"DRAConsumableCapacity":        true,
		"DRAListTypeAttributes":        false,
	}
	for _, item := range strings.Split(gates, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, found := strings.Cut(item, "=")
		if _, known := enabled[name]; !found || !known || (value != "true" && value != "false") {
			return structured.Features{}, fmt.Errorf("feature gate %q: expected one of the DRA gates as Name=true or Name=false", item)
		}
		enabled[name] = value == "true"
	}
	return structured.Features{
		AdminAccess:            enabled["DRAAdminAccess"],
		PrioritizedList:        enabled["DRAPrioritizedList"],
		PartitionableDevices:   enabled["DRAPartitionableDevices"],
		DeviceTaints:           enabled["DRADeviceTaints"],
		DeviceBindingAndStatus: enabled["DRADeviceBindingConditions"] && enabled["DRAResourceClaimDeviceStatus"],
		ConsumableCapacity:     enabled["DRAConsumableCapacity"],
		ListTypeAttributes:     enabled["DRAListTypeAttributes"],
	}, nil
}

// defaultClaim fills in what the apiserver defaults in a claim it stores (a request's allocation
// mode, ExactCount, and its count, 1), for claims read from files rather than from the apiserver.
func defaultClaim(claim *resourceapi.ResourceClaim) {
	fill := func(mode *resourceapi.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourceapi.DeviceAllocationModeExactCount
		}
		if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range claim.Spec.Devices.Requests {
		request := &claim.Spec.Devices.Requests[i]
		if request.Exactly != nil {
			fill(&request.Exactly.AllocationMode, &request.Exactly.Count)
		}
		for j := range request.FirstAvailable {
			fill(&request.FirstAvailable[j].AllocationMode, &request.FirstAvailable[j].Count)
		}
	}
}
