// Command prefpeer is benchmarks/preferred_allocation.py's Go peer: a port of kubedevice's
// "spread" policy, timed in-process on the requests read as JSON from stdin. The fleet's shape
// comes in as flags so that the Python side alone decides it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"
)

type Device struct {
	ID    string
	Node  int
	Group string
}

type node struct {
	groups map[string][]*Device
	count  int
}

type request struct {
	Size int   `json:"size"`
	Must []int `json:"must"`
}

var distances = map[int][]int{0: {10, 21, 31, 31}, 1: {21, 10, 31, 31}, 2: {31, 31, 10, 21}, 3: {31, 31, 21, 10}}

func distance(origin, n int) int {
	row, ok := distances[origin]
	if !ok || n < 0 || n >= len(row) {
		return 0
	}
	return row[n]
}

func choose(available, must []*Device, size int) []string {
	chosen := []string{}
	used := map[string]int{}
	exclude := map[string]bool{}
	for _, d := range must {
		chosen = append(chosen, d.ID)
		used[d.Group]++
		exclude[d.ID] = true
	}
	nodes := map[int]*node{}
	for _, d := range available {
		if exclude[d.ID] {
			continue
		}
		n := nodes[d.Node]
		if n == nil {
			n = &node{groups: map[string][]*Device{}}
			nodes[d.Node] = n
		}
		n.groups[d.Group] = append(n.groups[d.Group], d)
		n.count++
	}
	need := size - len(chosen)
	order := []int{}
	seen := map[int]bool{}
	for _, d := range must {
		if _, ok := nodes[d.Node]; ok && !seen[d.Node] {
			order = append(order, d.Node)
			seen[d.Node] = true
		}
	}
	rest := []int{}
	for n := range nodes {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	if len(order) == 0 && len(rest) > 0 {
		best := -1
		for _, n := range rest { // spread: fewest distinct devices that still fit
			if len(nodes[n].groups) >= need && (best < 0 || len(nodes[n].groups) < len(nodes[best].groups) ||
				len(nodes[n].groups) == len(nodes[best].groups) && n < best) {
				best = n
			}
		}
		if best < 0 {
			for _, n := range rest {
				if best < 0 || nodes[n].count > nodes[best].count {
					best = n
				}
			}
		}
		order = append(order, best)
		filtered := rest[:0]
		for _, n := range rest {
			if n != best {
				filtered = append(filtered, n)
			}
		}
		rest = filtered
	}
	origin := order[0]
	sort.Slice(rest, func(i, j int) bool {
		a, b := rest[i], rest[j]
		if distance(origin, a) != distance(origin, b) {
			return distance(origin, a) < distance(origin, b)
		}
		if nodes[a].count != nodes[b].count {
			return nodes[a].count > nodes[b].count
		}
		return a < b
	})
	for _, n := range append(order, rest...) {
		if len(chosen) >= size {
			break
		}
		chosen = append(chosen, spread(nodes[n], used, size-len(chosen))...)
	}
	return chosen
}

func spread(n *node, used map[string]int, need int) []string {
	names := make([]string, 0, len(n.groups))
	for g := range n.groups {
		names = append(names, g)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if used[a] != used[b] {
			return used[a] < used[b]
		}
		if len(n.groups[a]) != len(n.groups[b]) {
			return len(n.groups[a]) > len(n.groups[b])
		}
		return a < b
	})
	taken := []string{}
	for depth := 0; len(taken) < need && len(names) > 0; depth++ {
		live := names[:0]
		for _, g := range names {
			if depth < len(n.groups[g]) {
				live = append(live, g)
			}
		}
		names = live
		for _, g := range names {
			taken = append(taken, n.groups[g][depth].ID)
			used[g]++
			if len(taken) >= need {
				break
			}
		}
	}
	return taken
}

func main() {
	physical := flag.Int("physical", 0, "physical devices")
	replicas := flag.Int("replicas", 0, "advertised IDs per physical device")
	nodes := flag.Int("nodes", 0, "NUMA nodes, physical devices assigned round-robin")
	flag.Parse()
	if *physical <= 0 || *replicas <= 0 || *nodes <= 0 {
		fmt.Fprintln(os.Stderr, "prefpeer: -physical, -replicas and -nodes must be positive")
		os.Exit(2)
	}
	var requests []request
	if err := json.NewDecoder(os.Stdin).Decode(&requests); err != nil {
		panic(err)
	}
	devices := []*Device{}
	for p := 0; p < *physical; p++ {
		group := fmt.Sprintf("0000:%02x:%02x.0", p/32, p%32)
		for r := 0; r < *replicas; r++ {
			devices = append(devices, &Device{ID: fmt.Sprintf("%s::%d", group, r), Node: p % *nodes, Group: group})
		}
	}
	samples := make([]float64, 0, len(requests))
	for _, req := range requests {
		must := []*Device{}
		for _, i := range req.Must {
			must = append(must, devices[i])
		}
		start := time.Now()
		answer := choose(devices, must, req.Size)
		samples = append(samples, float64(time.Since(start).Nanoseconds())/1e6)
		if len(answer) != req.Size {
			panic("short answer")
		}
	}
	json.NewEncoder(os.Stdout).Encode(samples)
}
