package main

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// keepAtMost bounds the answers kept: past it they are all forgotten and kept anew.
const keepAtMost = 100_000

// memory keeps each node's answer for a shape of claims while nothing the allocator reads of that
// node changes: its slices, the allocated devices of its pools, the device classes, the slices
// every node sees. A workload's pods ask the same thing over and over, and between two of them
// one node changes.
type memory struct {
	epoch     uint64            // bumped by what every node reads
	versions  map[string]uint64 // node -> bumped by what that node reads
	poolNodes map[string]string // driver/pool -> the node its slices are on
	answers   map[memoryKey]kept
	seq       uint64 // numbers the answers worked out: one kept again is the same answer
}

type memoryKey struct{ shape, node string }

type kept struct {
	epoch, version, seq uint64
	assumed             string
	answer              nodeAnswer
}

func newMemory() *memory {
	return &memory{versions: map[string]uint64{}, poolNodes: map[string]string{}, answers: map[memoryKey]kept{}}
}

// get returns the answer kept, and its number.
func (m *memory) get(shape, node, assumed string) (nodeAnswer, uint64, bool) {
	found, ok := m.answers[memoryKey{shape, node}]
	if !ok || found.epoch != m.epoch || found.version != m.versions[node] || found.assumed != assumed {
		return nodeAnswer{}, 0, false
	}
	return found.answer, found.seq, true
}

// keep keeps an answer worked out now and returns its number.
func (m *memory) keep(shape, node, assumed string, answer nodeAnswer) uint64 {
	if len(m.answers) >= keepAtMost {
		m.answers = map[memoryKey]kept{}
	}
	m.seq++
	m.answers[memoryKey{shape, node}] = kept{m.epoch, m.versions[node], m.seq, assumed, answer}
	return m.seq
}

func (m *memory) forgetAll() { m.epoch++ }

// sliceChanged follows a slice put (after) or deleted (after nil).
func (m *memory) sliceChanged(before, after *resourceapi.ResourceSlice) {
	for _, slice := range []*resourceapi.ResourceSlice{before, after} {
		if slice == nil {
			continue
		}
		node := ""
		if slice.Spec.NodeName != nil {
			node = *slice.Spec.NodeName
		}
		if node == "" || len(slice.Spec.SharedCounters) > 0 {
			m.forgetAll() // a slice for all nodes, or by selector: any node may read it
			continue
		}
		m.versions[node]++
		m.poolNodes[slice.Spec.Driver+"/"+slice.Spec.Pool.Name] = node
	}
}

// claimChanged follows a claim put (after) or deleted (after nil): the nodes of the devices its
// allocation held or holds read it.
func (m *memory) claimChanged(before, after *resourceapi.ResourceClaim) {
	for _, claim := range []*resourceapi.ResourceClaim{before, after} {
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		for _, d := range claim.Status.Allocation.Devices.Results {
			if node, ok := m.poolNodes[d.Driver+"/"+d.Pool]; ok {
				m.versions[node]++
			} else {
				m.forgetAll()
			}
		}
	}
}

// byNode gives, per node, the assumed devices of its pools as one string (devices of a pool on no
// known node make every node's answers new).
func (m *memory) byNode(extra []assumed) map[string]string {
	grouped := map[string][]string{}
	for _, a := range extra {
		node, ok := m.poolNodes[a.Driver+"/"+a.Pool]
		if !ok {
			m.forgetAll()
			continue
		}
		share := ""
		if a.ShareID != nil {
			share = string(*a.ShareID)
		}
		encoded, _ := json.Marshal(a.ConsumedCapacity)
		grouped[node] = append(grouped[node], a.Driver+"/"+a.Pool+"/"+a.Device+"/"+share+"/"+string(encoded))
	}
	out := make(map[string]string, len(grouped))
	for node, list := range grouped {
		slices.Sort(list)
		out[node] = strings.Join(list, "|")
	}
	return out
}

// fingerprint names what the allocator reads of the claims to allocate: their specs, in order.
func fingerprint(claims []*resourceapi.ResourceClaim, full bool) string {
	hash := sha256.New()
	for _, claim := range claims {
		spec, _ := json.Marshal(claim.Spec)
		hash.Write(spec)
		hash.Write([]byte{0})
	}
	if full {
		hash.Write([]byte("full"))
	}
	return string(hash.Sum(nil))
}
