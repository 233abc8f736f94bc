package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// bench times Kubernetes the way the scheduler uses it: CompileCELExpression once, then
// DeviceMatches per device. Input: a JSON file {"expressions", "devices", "rounds", "batch"};
// output: one JSON line per expression with the nanoseconds of every batch of evaluations.
func bench(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: celdiff bench SPEC.json")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var spec struct {
		Expressions []string  `json:"expressions"`
		Devices     []request `json:"devices"`
		Rounds      int       `json:"rounds"`
		Batch       int       `json:"batch"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	devices := make([]dracel.Device, len(spec.Devices))
	for i, d := range spec.Devices {
		if devices[i], err = toDevice(d); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// Options{}: StoredExpressions, the environment the scheduler evaluates selectors with.
	ctx := context.Background()
	for _, expr := range spec.Expressions {
		result := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(expr, dracel.Options{})
		if result.Error != nil {
			fmt.Fprintln(os.Stderr, result.Error)
			return 1
		}
		var batches []int64
		for r := 0; r < spec.Rounds; r++ {
			for start := 0; start < len(devices); start += spec.Batch {
				end := min(start+spec.Batch, len(devices))
				begin := time.Now()
				for _, d := range devices[start:end] {
					if _, _, err := result.DeviceMatches(ctx, d); err != nil {
						fmt.Fprintln(os.Stderr, err)
						return 1
					}
				}
				batches = append(batches, time.Since(begin).Nanoseconds())
			}
		}
		line, _ := json.Marshal(map[string]any{"expression": expr, "batch_ns": batches})
		fmt.Println(string(line))
	}
	return 0
}
