package checker

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raftmq/raftmq/jepsen/history"
)

func TestLogStateFind(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := initState()
	var vals []string
	for i := 0; i < 3000; i++ {
		v := fmt.Sprintf("v%d", i)
		vals = append(vals, v)
		s = s.appendValue(v)
	}
	for i := 0; i < 2000; i++ {
		o := rng.Int63n(int64(len(vals)))
		nd := find(s.tail, o)
		require.Equal(t, o, nd.offset)
		require.Equal(t, vals[o], nd.value)
	}
	// jump pointers keep lookups logarithmic
	steps := 0
	for nd := s.tail; nd.offset > 0; steps++ {
		if nd.jump.offset >= 0 {
			nd = nd.jump
		}
	}
	assert.Less(t, steps, 64)

	desc := []history.Msg{{Offset: 2999, Value: "v2999"}, {Offset: 7, Value: "v7"}, {Offset: 0, Value: "v0"}}
	assert.True(t, s.holds(desc))
	assert.False(t, s.holds([]history.Msg{{Offset: 7, Value: "v8"}}))
	assert.False(t, s.holds([]history.Msg{{Offset: 3000, Value: "v3000"}}))
	assert.False(t, s.holds([]history.Msg{{Offset: -1, Value: "v0"}}))
	assert.True(t, s.holds(nil))
}

func TestLogStateEqualAndHash(t *testing.T) {
	base := initState().appendValue("a").appendValue("b")
	x := base.appendValue("c")
	y := base.appendValue("c") // same content, different nodes
	z := base.appendValue("d")
	assert.True(t, stateEqual(x, y))
	assert.Equal(t, stateHash(x), stateHash(y))
	assert.False(t, stateEqual(x, z))
	assert.NotEqual(t, stateHash(x), stateHash(z))
	// order matters
	ab := initState().appendValue("a").appendValue("b")
	ba := initState().appendValue("b").appendValue("a")
	assert.False(t, stateEqual(ab, ba))
	assert.NotEqual(t, stateHash(ab), stateHash(ba))
	// committed offsets are part of the state
	c := x
	c.committed = 3
	assert.False(t, stateEqual(x, c))
	// Step is pure
	before := describeState(base)
	ok, _ := step(base, &input{kind: sendOp, value: "e"}, &output{offset: 2})
	assert.True(t, ok)
	assert.Equal(t, before, describeState(base))
	assert.Equal(t, int64(2), base.n)
}

func TestStep(t *testing.T) {
	s := initState().appendValue("a").appendValue("b")
	cases := []struct {
		name string
		in   *input
		out  *output
		ok   bool
	}{
		{"send at next offset", &input{kind: sendOp, value: "c"}, &output{offset: 2}, true},
		{"send at a taken offset", &input{kind: sendOp, value: "c"}, &output{offset: 1}, false},
		{"send beyond the end", &input{kind: sendOp, value: "c"}, &output{offset: 3}, false},
		{"unresolved send", &input{kind: sendOp, value: "c"}, &output{unknown: true}, true},
		{"poll prefix", &input{kind: pollOp}, &output{desc: []history.Msg{{Offset: 0, Value: "a"}}}, true},
		{"poll empty", &input{kind: pollOp, offset: 2}, &output{}, true},
		{"poll wrong value", &input{kind: pollOp}, &output{desc: []history.Msg{{Offset: 1, Value: "a"}}}, false},
		{"poll future", &input{kind: pollOp}, &output{desc: []history.Msg{{Offset: 2, Value: "c"}}}, false},
		{"fetch none", &input{kind: fetchOp}, &output{offset: -1}, true},
		{"fetch wrong", &input{kind: fetchOp}, &output{offset: 0}, false},
		{"commit", &input{kind: commitOp, offset: 4}, &output{}, true},
	}
	for _, c := range cases {
		ok, _ := step(s, c.in, c.out)
		assert.Equal(t, c.ok, ok, c.name)
	}
	_, after := step(initState(), &input{kind: commitOp, offset: 4}, &output{})
	ok, _ := step(after, &input{kind: fetchOp}, &output{offset: 4})
	assert.True(t, ok)
}

// TestModelWithPorcupine checks small histories directly against the
// model, including the cases the research measured.
func TestModelWithPorcupine(t *testing.T) {
	send := func(v string, call, ret int64, off int64) porcupine.Operation {
		return porcupine.Operation{Input: &input{kind: sendOp, value: v}, Call: call, Output: &output{offset: off}, Return: ret}
	}
	unknown := func(v string, call int64) porcupine.Operation {
		return porcupine.Operation{Input: &input{kind: sendOp, value: v}, Call: call, Output: &output{unknown: true}, Return: 1 << 62}
	}
	poll := func(call, ret int64, from int64, vals ...string) porcupine.Operation {
		var msgs []history.Msg
		for i, v := range vals {
			msgs = append([]history.Msg{{Offset: from + int64(i), Value: v}}, msgs...)
		}
		return porcupine.Operation{Input: &input{kind: pollOp, offset: from}, Call: call, Output: &output{desc: msgs}, Return: ret}
	}
	commit := func(call, ret int64, off int64) porcupine.Operation {
		return porcupine.Operation{Input: &input{kind: commitOp, group: "g", offset: off}, Call: call, Output: &output{}, Return: ret}
	}
	fetch := func(call, ret int64, off int64) porcupine.Operation {
		return porcupine.Operation{Input: &input{kind: fetchOp, group: "g"}, Call: call, Output: &output{offset: off}, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"concurrent sends", []porcupine.Operation{send("a", 0, 10, 1), send("b", 0, 10, 0), poll(11, 12, 0, "b", "a")}, true},
		{"divergent value", []porcupine.Operation{send("a", 0, 10, 0), poll(11, 12, 0, "b")}, false},
		{"later send lower offset", []porcupine.Operation{send("a", 0, 10, 1), send("b", 20, 30, 0)}, false},
		{"stale prefix", []porcupine.Operation{send("a", 0, 10, 0), send("b", 11, 20, 1), poll(21, 22, 0, "a")}, true},
		{"timed-out send landed", []porcupine.Operation{unknown("a", 0), send("b", 5, 10, 1), poll(11, 12, 0, "a", "b")}, true},
		{"timed-out send lost", []porcupine.Operation{unknown("a", 0), send("b", 5, 10, 0), poll(11, 12, 0, "b")}, true},
		{"lww commit", []porcupine.Operation{commit(0, 1, 5), commit(2, 3, 7), fetch(4, 5, 7)}, true},
		{"commit goes back", []porcupine.Operation{commit(0, 1, 5), commit(2, 3, 7), fetch(4, 5, 5)}, false},
		{"fetch before commit", []porcupine.Operation{fetch(0, 1, 5), commit(2, 3, 5)}, false},
	}
	for _, c := range cases {
		got := porcupine.CheckOperations(logModel, c.ops)
		assert.Equal(t, c.ok, got, c.name)
	}
}

func TestPartition(t *testing.T) {
	ops := []porcupine.Operation{
		{Input: &input{kind: fetchOp, group: "g", queue: 1}, Output: &output{}},
		{Input: &input{kind: sendOp, queue: 2}, Output: &output{}},
		{Input: &input{kind: pollOp, queue: 0}, Output: &output{}},
		{Input: &input{kind: commitOp, group: "g", queue: 1}, Output: &output{}},
		{Input: &input{kind: sendOp, queue: 0}, Output: &output{}},
	}
	parts, keys := partition(ops)
	require.Len(t, parts, 3)
	assert.Equal(t, []string{"queue 0", "queue 2", `group "g" queue 1 offsets`},
		[]string{keys[0].String(), keys[1].String(), keys[2].String()})
	assert.Len(t, parts[0], 2)
	assert.Len(t, parts[2], 2)
}
