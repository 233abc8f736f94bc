// Command allocdiff runs the scheduler's structured allocator
// (k8s.io/dynamic-resource-allocation/structured) on cases read as JSON lines
// from stdin and prints one JSON line per case, for the differential test
// tests/interop/test_allocator_differential.py.
//
// The same file builds against v0.37.2 (this module) and v0.36.3 (v036/, a
// symlink to this file), so the Features fields are set by reflection from the
// gate names each version's Features.Set reports.
//
// Input:  {"features": {gate: bool}, "node": {"name": ..., "labels": {...}},
//
//	"classes": [...], "slices": [...], "claims": [...], "allocated": [...]}
//
// Output: {"results": [AllocationResult per claim]} when allocated,
//
//	{"unschedulable": "<reason or empty>"} when the allocator finds no
//	solution on this node, {"error": "..."} when it aborts.
//
// With -repeat N (for benchmarks/allocate_vs_go.py) each case is allocated N
// times with one CEL cache, as the scheduler keeps one across cycles, and the
// output adds "nanos": the wall time of each run from the allocated state to
// the results, JSON decoding and encoding left out.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type nodeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type input struct {
	Features  map[string]bool              `json:"features"`
	Node      nodeSpec                     `json:"node"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
}

type output struct {
	Results       []resourceapi.AllocationResult `json:"results,omitempty"`
	Unschedulable *string                        `json:"unschedulable,omitempty"`
	Error         string                         `json:"error,omitempty"`
	Nanos         []int64                        `json:"nanos,omitempty"`
}

// classLister answers like the scheduler's informer-backed lister: NotFound for an unknown class.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	classes := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, class := range l {
		classes = append(classes, class)
	}
	return classes, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// features sets each boolean field of structured.Features whose gates (as that
// field's Features.Set entry names them, "A+B" for several) are all on.
func features(gates map[string]bool) structured.Features {
	var result structured.Features
	value := reflect.ValueOf(&result).Elem()
	for i := 0; i < value.NumField(); i++ {
		var single structured.Features
		reflect.ValueOf(&single).Elem().Field(i).SetBool(true)
		names := single.Set().UnsortedList()
		if len(names) != 1 {
			continue
		}
		on := true
		for _, gate := range strings.Split(names[0], "+") {
			on = on && gates[gate]
		}
		value.Field(i).SetBool(on)
	}
	return result
}

// allocatedState is what the scheduler's GatherAllocatedState / ListAllAllocatedDevices
// build from allocated claims (foreachAllocatedDevice in
// k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go):
// admin-access results do not count; with consumable capacity, results with a shareID
// are shared IDs plus their consumed capacity.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.AdminAccess != nil && *result.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// newCache is the scheduler's cache (dynamicresources.go New): consumable capacity and list attributes only.
func newCache(in input) *cel.Cache {
	return cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: in.Features["DRAConsumableCapacity"],
		EnableListTypeAttributes: in.Features["DRAListTypeAttributes"],
	})
}

func run(in input, cache *cel.Cache) output {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lister := classLister{}
	for _, class := range in.Classes {
		lister[class.Name] = class
	}
	state := allocatedState(in.Allocated, in.Features["DRAConsumableCapacity"])
	allocator, err := structured.NewAllocator(ctx, features(in.Features), state, lister, in.Slices, cache)
	if err != nil {
		return output{Error: err.Error()}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.Node.Name, Labels: in.Node.Labels}}
	results, err := allocator.Allocate(ctx, node, in.Claims)
	if errors.Is(err, structured.ErrFailedAllocationOnNode) {
		reason := err.Error()
		return output{Unschedulable: &reason}
	}
	if err != nil {
		return output{Error: err.Error()}
	}
	if results == nil {
		reason := ""
		return output{Unschedulable: &reason}
	}
	return output{Results: results}
}

// timed runs the case repeat times on one cache and records each run's wall time.
func timed(in input, repeat int) output {
	cache := newCache(in)
	var out output
	nanos := make([]int64, 0, repeat)
	for i := 0; i < repeat; i++ {
		start := time.Now()
		out = run(in, cache)
		nanos = append(nanos, time.Since(start).Nanoseconds())
	}
	out.Nanos = nanos
	return out
}

func main() {
	repeat := flag.Int("repeat", 0, "allocate each case this many times and report each run's nanoseconds")
	flag.Parse()
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	writer := bufio.NewWriter(os.Stdout)
	defer writer.Flush()
	encoder := json.NewEncoder(writer)
	for scanner.Scan() {
		var in input
		var out output
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			out = output{Error: fmt.Sprintf("decode: %v", err)}
		} else if *repeat > 0 {
			out = timed(in, *repeat)
		} else {
			out = run(in, newCache(in))
		}
		if err := encoder.Encode(out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
