package main

import (
	"encoding/hex"
	"encoding/json"
	"slices"
)

// keepShapesSent bounds the shapes whose answers are remembered as sent.
const keepShapesSent = 64

// sent remembers, per shape of claims, each node's answer as the caller was last sent it, so that
// an answer can name only the nodes whose answer changed: a workload's pods ask the same thing of
// thousands of nodes, and between two of them one node changes.
type sent struct {
	shapes map[string]map[string]uint64 // shape -> node -> the number of the answer sent
	order  []string
}

func newSent() *sent { return &sent{shapes: map[string]map[string]uint64{}} }

// changed encodes the answers of the nodes not sent as they are now (“numbers“: each answer's
// number in memory, 0 for one not kept, always sent). Unless the caller still holds the shape's
// answers (have), every node is "changed" and the caller is to forget the others.
func (s *sent) changed(shape string, have bool, names []string, answers []nodeAnswer, numbers []uint64) (map[string]json.RawMessage, bool, error) {
	before, known := s.shapes[shape]
	delta := have && known
	if !delta {
		before = map[string]uint64{}
		s.remember(shape, before)
	}
	out := make(map[string]json.RawMessage)
	for i, name := range names {
		if delta && numbers[i] != 0 && before[name] == numbers[i] {
			continue
		}
		encoded, err := json.Marshal(answers[i])
		if err != nil {
			return nil, false, err
		}
		before[name] = numbers[i]
		out[name] = encoded
	}
	return out, delta, nil
}

func (s *sent) remember(shape string, answers map[string]uint64) {
	if _, ok := s.shapes[shape]; !ok {
		s.order = append(s.order, shape)
	}
	s.shapes[shape] = answers
	for len(s.order) > keepShapesSent {
		delete(s.shapes, s.order[0])
		s.order = s.order[1:]
	}
}

func shapeName(shape string) string { return hex.EncodeToString([]byte(shape))[:32] }

func holds(have []string, name string) bool { return slices.Contains(have, name) }
