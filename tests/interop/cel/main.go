// Command celdiff reads DRA CEL selector cases as JSON lines on stdin and prints how the
// real k8s.io/dynamic-resource-allocation/cel classifies each one, in the same format as
// `kubedevice dra cel`, so the Python engine can be checked against Kubernetes itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type attribute struct {
	Int      *int64    `json:"int"`
	Bool     *bool     `json:"bool"`
	String   *string   `json:"string"`
	Version  *string   `json:"version"`
	Ints     *[]int64  `json:"ints"`
	Bools    *[]bool   `json:"bools"`
	Strings  *[]string `json:"strings"`
	Versions *[]string `json:"versions"`
}

type capacity struct {
	Value string `json:"value"`
}

type request struct {
	Expression               string               `json:"expression"`
	Driver                   string               `json:"driver"`
	Attributes               map[string]attribute `json:"attributes"`
	Capacity                 map[string]capacity  `json:"capacity"`
	AllowMultipleAllocations *bool                `json:"allowMultipleAllocations"`
	Env                      string               `json:"env"`
	Features                 map[string]bool      `json:"features"`
}

type answer struct {
	Result  *bool  `json:"result,omitempty"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
	Cost    uint64 `json:"cost"`
}

func toAttribute(a attribute) resourceapi.DeviceAttribute {
	out := resourceapi.DeviceAttribute{IntValue: a.Int, BoolValue: a.Bool, StringValue: a.String, VersionValue: a.Version}
	if a.Ints != nil {
		out.IntValues = *a.Ints
	}
	if a.Bools != nil {
		out.BoolValues = *a.Bools
	}
	if a.Strings != nil {
		out.StringValues = *a.Strings
	}
	if a.Versions != nil {
		out.VersionValues = *a.Versions
	}
	return out
}

// toDevice converts one input line's device into the form DeviceMatches takes.
func toDevice(req request) (dracel.Device, error) {
	device := dracel.Device{
		Driver:                   req.Driver,
		AllowMultipleAllocations: req.AllowMultipleAllocations,
		Attributes:               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		Capacity:                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
	}
	for name, a := range req.Attributes {
		device.Attributes[resourceapi.QualifiedName(name)] = toAttribute(a)
	}
	for name, c := range req.Capacity {
		q, err := resource.ParseQuantity(c.Value)
		if err != nil {
			return device, err
		}
		device.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: q}
	}
	return device, nil
}

func evaluate(req request) (ans answer) {
	// cel-go can panic while compiling (its homogeneous-literal validator on an optional entry of
	// type dyn, `[?dyn(x)]`): the API server's handler recovers such a panic as an internal error,
	// the differential wants its text.
	defer func() {
		if r := recover(); r != nil {
			ans = answer{Error: "panic", Message: fmt.Sprint(r)}
		}
	}()
	// No "env": Options{} as the library's callers pass it (EnvType nil means StoredExpressions).
	var options dracel.Options
	if req.Env != "" {
		envType := environment.Type(req.Env)
		options.EnvType = &envType
	}
	features := dracel.Features{
		EnableConsumableCapacity: req.Features["DRAConsumableCapacity"],
		EnableListTypeAttributes: req.Features["DRAListTypeAttributes"],
	}
	result := dracel.GetCompiler(features).CompileCELExpression(req.Expression, options)
	if result.Error != nil {
		return answer{Error: "compile", Message: result.Error.Error()}
	}
	device, err := toDevice(req)
	if err != nil {
		return answer{Error: "input", Message: err.Error()}
	}
	matches, _, err := result.DeviceMatches(context.Background(), device)
	if err != nil {
		return answer{Error: "runtime", Message: err.Error(), Cost: result.MaxCost}
	}
	return answer{Result: &matches, Cost: result.MaxCost}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		os.Exit(bench(os.Args[2:]))
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = answer{Error: "input", Message: err.Error()}
		} else {
			ans = evaluate(req)
		}
		line, _ := json.Marshal(ans)
		out.Write(line)
		out.WriteString("\n")
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}
