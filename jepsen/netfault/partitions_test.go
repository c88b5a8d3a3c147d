package netfault

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
)

// seeds is how many random partitions each property is checked on.
const seeds = 300

// topology answers reachability questions about a cut list.
type topology struct {
	n   int
	cut map[[2]int]bool
}

// newTopology checks that the cut is well formed (nodes in range, no self
// pairs, no duplicates, sorted) and indexes it.
func newTopology(t *testing.T, n int, cut [][2]int) topology {
	t.Helper()
	if !slices.IsSortedFunc(cut, comparePairs) {
		t.Fatalf("cut not sorted: %v", cut)
	}
	top := topology{n: n, cut: make(map[[2]int]bool)}
	for _, p := range cut {
		if p[0] < 1 || p[0] > n || p[1] < 1 || p[1] > n || p[0] == p[1] {
			t.Fatalf("bad pair %v in %v", p, cut)
		}
		if top.cut[p] {
			t.Fatalf("duplicate pair %v in %v", p, cut)
		}
		top.cut[p] = true
	}
	return top
}

// sends returns the nodes a's bytes reach, a included.
func (top topology) sends(a int) []int {
	var out []int
	for b := 1; b <= top.n; b++ {
		if a == b || !top.cut[[2]int{a, b}] {
			out = append(out, b)
		}
	}
	return out
}

// hears returns the nodes whose bytes reach a, a included.
func (top topology) hears(a int) []int {
	var out []int
	for b := 1; b <= top.n; b++ {
		if a == b || !top.cut[[2]int{b, a}] {
			out = append(out, b)
		}
	}
	return out
}

// symmetric reports whether every cut pair is cut both ways.
func (top topology) symmetric() bool {
	for p := range top.cut {
		if !top.cut[[2]int{p[1], p[0]}] {
			return false
		}
	}
	return true
}

// groups returns the connected components of the uncut graph, each sorted,
// for a symmetric cut.
func (top topology) groups() [][]int {
	seen := make([]bool, top.n+1)
	var out [][]int
	for a := 1; a <= top.n; a++ {
		if seen[a] {
			continue
		}
		var g []int
		stack := []int{a}
		seen[a] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			g = append(g, x)
			for _, y := range top.sends(x) {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		slices.Sort(g)
		out = append(out, g)
	}
	return out
}

// clique reports whether every two nodes of g reach each other.
func (top topology) clique(g []int) bool {
	for _, a := range g {
		for _, b := range g {
			if a != b && top.cut[[2]int{a, b}] {
				return false
			}
		}
	}
	return true
}

// sizes lists the cluster sizes the properties are checked on.
var sizes = []int{3, 4, 5, 7}

func TestIsolateOne(t *testing.T) {
	for _, n := range sizes {
		for node := 1; node <= n; node++ {
			cut, desc := IsolateOne(n, node)
			top := newTopology(t, n, cut)
			if len(cut) != 2*(n-1) || !top.symmetric() {
				t.Fatalf("n=%d isolate %d: %v", n, node, cut)
			}
			if got := top.sends(node); !slices.Equal(got, []int{node}) {
				t.Fatalf("n=%d: isolated node %d reaches %v", n, node, got)
			}
			if gs := top.groups(); len(gs) != 2 {
				t.Fatalf("n=%d isolate %d: groups %v", n, node, gs)
			}
			if want := "isolate n" + string(rune('0'+node)); desc != want {
				t.Fatalf("description %q, want %q", desc, want)
			}
		}
	}
}

func TestHalves(t *testing.T) {
	descRE := regexp.MustCompile(`^halves \{\d+(,\d+)*\} \| \{\d+(,\d+)*\}$`)
	for _, n := range sizes {
		for seed := range uint64(seeds) {
			cut, desc := Halves(n, rand.New(rand.NewPCG(seed, 0)))
			top := newTopology(t, n, cut)
			gs := top.groups()
			if len(gs) != 2 || !top.symmetric() {
				t.Fatalf("n=%d seed=%d: groups %v cut %v", n, seed, gs, cut)
			}
			small, large := len(gs[0]), len(gs[1])
			if small > large {
				small, large = large, small
			}
			if small != n/2 || large != n-n/2 {
				t.Fatalf("n=%d seed=%d: group sizes %d and %d", n, seed, small, large)
			}
			for _, g := range gs {
				if !top.clique(g) {
					t.Fatalf("n=%d seed=%d: group %v is not whole", n, seed, g)
				}
			}
			if len(cut) != 2*small*large {
				t.Fatalf("n=%d seed=%d: %d cut pairs, want every pair across", n, seed, len(cut))
			}
			if !descRE.MatchString(desc) {
				t.Fatalf("description %q", desc)
			}
		}
	}
}

func TestBridge(t *testing.T) {
	descRE := regexp.MustCompile(`^bridge \{\d+(,\d+)*\} \| \{\d+(,\d+)*\} via n\d+$`)
	for _, n := range sizes {
		for seed := range uint64(seeds) {
			cut, desc := Bridge(n, rand.New(rand.NewPCG(seed, 0)))
			top := newTopology(t, n, cut)
			if !top.symmetric() {
				t.Fatalf("n=%d seed=%d: asymmetric %v", n, seed, cut)
			}
			var bridges, others []int
			for a := 1; a <= n; a++ {
				if len(top.sends(a)) == n {
					bridges = append(bridges, a)
				} else {
					others = append(others, a)
				}
			}
			if len(bridges) != 1 {
				t.Fatalf("n=%d seed=%d: nodes reaching all: %v (cut %v)", n, seed, bridges, cut)
			}
			// Without the bridge, the others split into two whole sides.
			var a, b []int
			for _, x := range others {
				if len(a) == 0 || !top.cut[[2]int{a[0], x}] {
					a = append(a, x)
				} else {
					b = append(b, x)
				}
			}
			if len(a) == 0 || len(b) == 0 || !top.clique(a) || !top.clique(b) {
				t.Fatalf("n=%d seed=%d: sides %v and %v", n, seed, a, b)
			}
			if len(cut) != 2*len(a)*len(b) {
				t.Fatalf("n=%d seed=%d: %d cut pairs for sides %v %v", n, seed, len(cut), a, b)
			}
			if !descRE.MatchString(desc) {
				t.Fatalf("description %q", desc)
			}
		}
	}
}

func TestMajoritiesRing(t *testing.T) {
	for _, n := range sizes {
		majority := n/2 + 1
		for seed := range uint64(seeds) {
			cut, desc := MajoritiesRing(n, rand.New(rand.NewPCG(seed, 0)))
			top := newTopology(t, n, cut)
			views := make(map[string]int)
			for a := 1; a <= n; a++ {
				hears, sends := top.hears(a), top.sends(a)
				if len(hears) != majority || len(sends) < majority {
					t.Fatalf("n=%d seed=%d: n%d hears %v, reaches %v; want a majority of %d (cut %v)",
						n, seed, a, hears, sends, majority, cut)
				}
				views[groupString(hears)]++
			}
			if len(views) != n {
				t.Fatalf("n=%d seed=%d: views overlap exactly: %v", n, seed, views)
			}
			if odd := majority%2 == 1; odd != top.symmetric() {
				t.Fatalf("n=%d seed=%d: symmetric=%v with majority %d", n, seed, top.symmetric(), majority)
			}
			if len(desc) == 0 {
				t.Fatal("empty description")
			}
		}
	}
	// Three nodes: a one-way ring of three cut pairs.
	cut, _ := MajoritiesRing(3, rand.New(rand.NewPCG(1, 1)))
	if len(cut) != 3 {
		t.Fatalf("n=3 ring cut %v", cut)
	}
}

func TestOneWay(t *testing.T) {
	cut, desc := OneWay(5, 4, 2)
	if !slices.Equal(cut, [][2]int{{4, 2}}) || desc != "one-way n4 -x-> n2" {
		t.Fatalf("OneWay(5,4,2) = %v, %q", cut, desc)
	}
	top := newTopology(t, 5, cut)
	if len(top.sends(2)) != 5 || len(top.sends(4)) != 4 {
		t.Fatalf("one-way cut %v is not one-way", cut)
	}
}

func TestHelpersAreDeterministic(t *testing.T) {
	for _, f := range []func(int, *rand.Rand) ([][2]int, string){Halves, Bridge, MajoritiesRing} {
		c1, d1 := f(5, rand.New(rand.NewPCG(42, 1)))
		c2, d2 := f(5, rand.New(rand.NewPCG(42, 1)))
		if !slices.Equal(c1, c2) || d1 != d2 {
			t.Fatalf("same seed, different partitions: %q vs %q", d1, d2)
		}
	}
	// Different seeds explore different partitions.
	descs := make(map[string]bool)
	for seed := range uint64(50) {
		_, d := Halves(5, rand.New(rand.NewPCG(seed, 0)))
		descs[d] = true
	}
	if len(descs) < 5 {
		t.Fatalf("only %d distinct halves of 5 nodes in 50 seeds", len(descs))
	}
}

func TestHelpersPanicOnBadArguments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	cases := map[string]func(){
		"isolate 0":      func() { IsolateOne(3, 0) },
		"isolate 4 of 3": func() { IsolateOne(3, 4) },
		"halves of 1":    func() { Halves(1, rng) },
		"bridge of 2":    func() { Bridge(2, rng) },
		"ring of 2":      func() { MajoritiesRing(2, rng) },
		"one-way self":   func() { OneWay(3, 2, 2) },
		"one-way range":  func() { OneWay(3, 1, 4) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
