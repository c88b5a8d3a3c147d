package netfault

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// The helpers below build cut lists for [Net.Partition] over nodes 1..n,
// after Jepsen's partition nemeses. Each returns the cut (from, to) pairs,
// sorted, and a human description. They panic on arguments that cannot
// describe such a partition (a node out of range, too few nodes): those are
// programming errors.

// IsolateOne cuts node off from every other node, both ways.
// Description: "isolate n2".
func IsolateOne(n, node int) ([][2]int, string) {
	checkNode(n, node)
	rest := make([]int, 0, n-1)
	for i := 1; i <= n; i++ {
		if i != node {
			rest = append(rest, i)
		}
	}
	return cutBetween([]int{node}, rest), fmt.Sprintf("isolate n%d", node)
}

// Halves splits the nodes at random into two groups of n/2 and n-n/2 and
// cuts every pair across them, both ways. It needs n >= 2.
// Description: "halves {1} | {2,3}", the smaller group first.
func Halves(n int, rng *rand.Rand) ([][2]int, string) {
	if n < 2 {
		panic(fmt.Sprintf("netfault: halves of %d nodes", n))
	}
	p := perm(n, rng)
	a, b := sorted(p[:n/2]), sorted(p[n/2:])
	return cutBetween(a, b), fmt.Sprintf("halves %s | %s", groupString(a), groupString(b))
}

// Bridge splits the nodes at random into two halves and one bridge node
// that stays connected to both, and cuts every pair across the halves, both
// ways. It needs n >= 3.
// Description: "bridge {1} | {3} via n2".
func Bridge(n int, rng *rand.Rand) ([][2]int, string) {
	if n < 3 {
		panic(fmt.Sprintf("netfault: bridge of %d nodes", n))
	}
	p := perm(n, rng)
	bridge, rest := p[0], p[1:]
	a, b := sorted(rest[:len(rest)/2]), sorted(rest[len(rest)/2:])
	return cutBetween(a, b), fmt.Sprintf("bridge %s | %s via n%d", groupString(a), groupString(b), bridge)
}

// MajoritiesRing arranges the nodes in a random ring and lets each node hear
// only a majority of nodes centred on itself, so that every node sees a
// majority and no two nodes see the same one (Jepsen's majorities-ring). It
// needs n >= 3.
//
// Each window of m = n/2+1 consecutive ring nodes is the view of its middle
// node (index m/2), which is cut from every node outside the window. With an
// odd m (n = 4, 5) the views are symmetric and so is the cut. With an even m
// (n = 3, 6) they are not: for n = 3 each node hears one neighbour and is
// heard by the other, a one-way ring, since three nodes cannot each be
// linked both ways to exactly one other.
// Description: "majorities ring: n1 hears {1,2}, n2 hears {2,3}, n3 hears {1,3}",
// each node followed by the nodes whose bytes reach it.
func MajoritiesRing(n int, rng *rand.Rand) ([][2]int, string) {
	if n < 3 {
		panic(fmt.Sprintf("netfault: majorities ring of %d nodes", n))
	}
	ring := perm(n, rng)
	m := n/2 + 1
	views := make([][]int, n+1)
	set := make(map[[2]int]bool)
	for k := range n {
		window := make([]int, m)
		for j := range m {
			window[j] = ring[(k+j)%n]
		}
		owner := window[m/2]
		views[owner] = sorted(window)
		for x := 1; x <= n; x++ {
			if !slices.Contains(window, x) {
				set[[2]int{x, owner}] = true
			}
		}
	}
	parts := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		parts = append(parts, fmt.Sprintf("n%d hears %s", i, groupString(views[i])))
	}
	return sortedPairs(set), "majorities ring: " + strings.Join(parts, ", ")
}

// OneWay cuts only the bytes from node "from" to node "to"; "to" can still
// reach "from" (an asymmetric partition).
// Description: "one-way n1 -x-> n2".
func OneWay(n, from, to int) ([][2]int, string) {
	checkNode(n, from)
	checkNode(n, to)
	if from == to {
		panic(fmt.Sprintf("netfault: one-way cut of n%d to itself", from))
	}
	return [][2]int{{from, to}}, fmt.Sprintf("one-way n%d -x-> n%d", from, to)
}

// checkNode panics unless node is in 1..n.
func checkNode(n, node int) {
	if node < 1 || node > n {
		panic(fmt.Sprintf("netfault: node %d out of range 1..%d", node, n))
	}
}

// perm returns the nodes 1..n in random order.
func perm(n int, rng *rand.Rand) []int {
	p := rng.Perm(n)
	for i := range p {
		p[i]++
	}
	return p
}

// sorted returns a sorted copy of nodes.
func sorted(nodes []int) []int {
	s := slices.Clone(nodes)
	slices.Sort(s)
	return s
}

// cutBetween returns every pair across groups a and b, both ways, sorted.
func cutBetween(a, b []int) [][2]int {
	set := make(map[[2]int]bool, 2*len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			set[[2]int{x, y}] = true
			set[[2]int{y, x}] = true
		}
	}
	return sortedPairs(set)
}

// groupString renders nodes as "{1,2,3}".
func groupString(nodes []int) string {
	parts := make([]string, len(nodes))
	for i, x := range nodes {
		parts[i] = strconv.Itoa(x)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
