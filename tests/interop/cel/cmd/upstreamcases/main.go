// Command upstreamcases prints the test table of k8s.io/dynamic-resource-allocation/cel
// compile_test.go (v0.37.2, copied below unchanged apart from package qualifiers) as JSON lines,
// so that tests/dra/test_cel_upstream.py can hold our engine to every case. Regenerate with
//
//	go run ./cmd/upstreamcases > ../../dra/data/cel_upstream_cases.jsonl
//
// Copyright The Kubernetes Authors, Apache License 2.0 (the table).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

type Features = dracel.Features

const maxElementsListTypeEnabled = uint64(max(resourceapi.DeviceAttributeMaxValueLength, resourceapi.ResourceSliceMaxAttributeValuesPerDevice))

var testcases = map[string]struct {
	// If nil, the testcase is executed with stored and new expressions.
	// If non-nil, it must point to environment.StoredExpressions or environment.NewExpressions
	// to select that kind of expression.
	envType *environment.Type
	// If nil, the testcase is executed with all combination of features,
	// otherwise only with the given combination.
	features *Features

	expression               string
	driver                   string
	allowMultipleAllocations *bool
	attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	expectCompileError       string
	expectMatchError         string
	expectMatch              bool

	// There's no good way to verify that the cost of an expression
	// really is what it should be other than eye-balling it. The
	// cost should not change in the future unless the expression
	// gets changed, so this provides some protection against
	// regressions.
	expectCost uint64
}{
	"true": {
		expression:  "true",
		expectMatch: true,
	},
	"false": {
		expression:  "false",
		expectMatch: false,
	},
	"syntax-error": {
		expression:         "?!",
		expectCompileError: "Syntax error",
	},
	"type-error": {
		expression:         `1`,
		expectCompileError: "must evaluate to bool or the unknown type, not int",
	},
	"runtime-error-lookup-identifier": {
		expression:       `device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))`,
		expectMatchError: "no such key: noSuchAttr",
		expectCost:       6,
	},
	"runtime-error-lookup-map": {
		expression:       `device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))`,
		expectMatchError: "no such key: noSuchAttr",
		expectCost:       6,
	},
	"domain-check-negative": {
		expression:  `"no-such-domain" in device.attributes`,
		expectMatch: false,
		expectCost:  3,
	},
	"domain-check-positive": {
		expression:  `"dra.example.com" in device.attributes`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"dra.example.com/something": {BoolValue: ptr.To(true)}},
		expectMatch: true,
		expectCost:  3,
	},
	"empty-driver-name": {
		expression:  `device.driver == ""`,
		expectMatch: true,
		expectCost:  2,
	},
	"real-driver-name": {
		expression:  `device.driver == "dra.example.com"`,
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4,
	},
	"driver-name-qualifier": {
		expression:  `device.attributes["dra.example.com"].name`,
		driver:      "dra.example.com",
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: ptr.To(true)}},
		expectMatch: true,
		expectCost:  4,
	},
	"driver-name-qualifier-map-lookup": {
		expression:  `device.attributes["dra.example.com"]["name"]`,
		driver:      "dra.example.com",
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: ptr.To(true)}},
		expectMatch: true,
		expectCost:  4,
	},
	"bind": {
		expression:  `cel.bind(dra, device.attributes["dra.example.com"], dra.name)`,
		driver:      "dra.example.com",
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: ptr.To(true)}},
		expectMatch: true,
		expectCost:  15,
	},
	"qualified-attribute-name": {
		expression:  `device.attributes["other.example.com"].name`,
		driver:      "dra.example.com",
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"other.example.com/name": {BoolValue: ptr.To(true)}},
		expectMatch: true,
		expectCost:  4,
	},
	"bool": {
		expression:  `device.attributes["dra.example.com"].name`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: ptr.To(true)}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4,
	},
	"int": {
		expression:  `device.attributes["dra.example.com"].name > 0`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValue: ptr.To(int64(1))}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  5,
	},
	"string": {
		expression:  `device.attributes["dra.example.com"].name == "fish"`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValue: ptr.To("fish")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  5,
	},
	"macro-compilation-error-new-expressions": {
		features:           &Features{EnableListTypeAttributes: false},
		envType:            new(environment.NewExpressions),
		expression:         `device.attributes["dra.example.com"].ids.exists(id, id == 1)`,
		driver:             "dra.example.com",
		expectCompileError: "compilation failed",
	},
	"macro-exists-on-int": {
		features:         &Features{EnableListTypeAttributes: true},
		expression:       `device.attributes["dra.example.com"].name.exists(x, x > 0)`,
		attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValue: new(int64(1))}},
		driver:           "dra.example.com",
		expectMatchError: "got 'types.Int', expected iterable type",
		expectCost:       5 + ((3 + 3) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(!accu)") + cost(loopStep=="accu && (x > 0)")) * maxElementsListTypeEnabled */),
	},
	"macro-exists-on-bool": {
		features:         &Features{EnableListTypeAttributes: true},
		expression:       `device.attributes["dra.example.com"].name.exists(x, x == true)`,
		attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: new(true)}},
		driver:           "dra.example.com",
		expectMatchError: "got 'types.Bool', expected iterable type",
		expectCost:       5 + ((3 + 3) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(!accu)") + cost(loopStep=="accu && (x > 0)")) * maxElementsListTypeEnabled */),
	},
	"macro-exists-on-string": {
		features:         &Features{EnableListTypeAttributes: true},
		expression:       `device.attributes["dra.example.com"].name.exists(x, x == "fish")`,
		attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValue: new("fish")}},
		driver:           "dra.example.com",
		expectMatchError: "got 'types.String', expected iterable type",
		expectCost:       5 + ((3 + 3) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(!accu)") + cost(loopStep=="accu && (x > 0)")) * maxElementsListTypeEnabled */),
	},
	"list-result-type-causes-match-error": {
		expression:       `device.attributes["dra.example.com"].names`,
		attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {StringValues: []string{"fish", "bird"}}},
		driver:           "dra.example.com",
		expectMatchError: "CEL result of type list could not be converted to bool",
		expectCost:       4,
	},
	"includes-function-can-evaluate": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes("fish")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValues: []string{"fish", "bird"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"list-of-bool": {
		expression:  `device.attributes["dra.example.com"].names.size() == 2`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {BoolValues: []bool{true, false}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"list-of-int": {
		expression:  `device.attributes["dra.example.com"].names.size() == 2`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {IntValues: []int64{1, 2}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"list-of-string": {
		expression:  `device.attributes["dra.example.com"].names.size() == 2`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {StringValues: []string{"fish", "bird"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"list-of-semver": {
		expression:  `device.attributes["dra.example.com"].names.size() == 2`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {VersionValues: []string{"1.0.0", "2.0.0"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"macro-on-list-of-int": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].names.exists(x, x > 0)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {IntValues: []int64{1, 2}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  5 + ((3 + 3) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(!accu)") + cost(loopStep=="accu && (x > 0)")) * maxElementsListTypeEnabled */),
	},
	"macro-on-list-of-string": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].names.all(x, x != "")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {StringValues: []string{"fish", "bird"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  5 + ((2 + 2) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(accu)") + cost(loopStep=="accu && (x != "")")) * maxElementsListTypeEnabled */),
	},
	"macro-on-list-of-semver": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {VersionValues: []string{"1.0.0", "2.0.0"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  5 + ((2 + 4) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(accu)") + cost(loopStep=="accu && (x.isGreaterThan(semver("0.0.1"))")) * maxElementsListTypeEnabled */),
	},
	"includes-function-compilation-error": {
		features:           &Features{EnableListTypeAttributes: false},
		envType:            ptr.To(environment.NewExpressions),
		expression:         `device.attributes["dra.example.com"].attr.includes("fish")`,
		driver:             "dra.example.com",
		expectCompileError: "undeclared reference to 'includes'",
	},
	"includes-function-compilation-and-eval-success": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].attr.includes("fish")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"attr": {StringValue: new("fish")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-bool-scalar-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(true)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: new(true)}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-bool-scalar-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		envType:     ptr.To(environment.NewExpressions),
		expression:  `device.attributes["dra.example.com"].name.includes(true)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValue: new(false)}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-bool-list-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(true)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValues: []bool{true, false}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-bool-list-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(false)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {BoolValues: []bool{true, true}}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-int-scalar-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(1)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValue: new(int64(1))}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-int-scalar-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(1)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValue: new(int64(2))}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-int-list-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(1)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValues: []int64{1, 2}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-int-list-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(3)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {IntValues: []int64{1, 2}}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-string-scalar-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes("fish")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValue: new("fish")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-string-scalar-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes("bird")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValue: new("fish")}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-string-list-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes("fish")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValues: []string{"fish", "bird"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-string-list-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes("cat")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValues: []string{"fish", "bird"}}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"includes-function-on-semver-scalar-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(semver("1.0.0"))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValue: new("1.0.0")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64 /* cost of "includes" on dynamic type */ + 1,
	},
	"includes-function-on-semver-scalar-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(semver("2.0.0"))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValue: new("1.0.0")}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64 /* cost of "includes" on dynamic type */ + 1,
	},
	"includes-function-on-semver-list-positive": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(semver("1.0.0"))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValues: []string{"1.0.0", "2.0.0"}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64 /* cost of "includes" on dynamic type */ + 1,
	},
	"includes-function-on-semver-list-negative": {
		features:    &Features{EnableListTypeAttributes: true},
		expression:  `device.attributes["dra.example.com"].name.includes(semver("3.0.0"))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValues: []string{"1.0.0", "2.0.0"}}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64 /* cost of "includes" on dynamic type */ + 1,
	},
	"includes-function-on-very-long-list-positive": {
		features:   &Features{EnableListTypeAttributes: true},
		expression: fmt.Sprintf(`device.attributes["dra.example.com"].name.includes("value-%d")`, resourceapi.ResourceSliceMaxAttributeValuesPerDevice),
		attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {StringValues: func() []string {
			values := make([]string, resourceapi.ResourceSliceMaxAttributeValuesPerDevice)
			for i := range values {
				values[i] = fmt.Sprintf("value-%d", i)
			}
			return values
		}()}},
		driver:      "dra.example.com",
		expectMatch: false,
		expectCost:  4 + 64, /* cost of "includes" on dynamic type */
	},
	"in-operator-on-list": {
		// This case is for documenting purpose to present the difference of call cost estimation
		// between "in" operator and "includes" function.
		// The cost estimation of both "in" operator and "includes" function is based on maxElementsListTypeEnabled.
		expression:  `1 in device.attributes["dra.example.com"].names`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"names": {IntValues: []int64{1, 2, 3}}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  4 + 64, /* cost of "in" is maxElementsListTypeEnabled*/
	},
	"version": {
		expression:  `device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValue: ptr.To("1.0.0")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"version_v": {
		// Relaxed parsing with v prefix.
		expression:  `device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValue: ptr.To("1.0.0")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  7,
	},
	"macro-exists-on-version": {
		features:         &Features{EnableListTypeAttributes: true},
		expression:       `device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))`,
		attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"name": {VersionValue: new("1.0.0")}},
		driver:           "dra.example.com",
		expectMatchError: "got 'cel.Semver', expected iterable type",
		expectCost:       5 + ((3 + 4) * maxElementsListTypeEnabled /* (cost(loopCondition=="not_strictly_false(!accu)") + cost(loopStep=="accu && (x.isGreaterThan(semver("0.0.1"))")) * maxElementsListTypeEnabled */),
	},
	"quantity": {
		expression:  `device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))`,
		capacity:    map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"name": {Value: resource.MustParse("1Mi")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  6,
	},
	"check-positive": {
		expression:  `"name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))`,
		capacity:    map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"name": {Value: resource.MustParse("1Mi")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  10,
	},
	"check-negative": {
		expression:  `!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))`,
		expectMatch: true,
		expectCost:  11,
	},
	"all": {
		expression: `
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
`,

		attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"bool":    {BoolValue: ptr.To(true)},
			"int":     {IntValue: ptr.To(int64(1))},
			"string":  {StringValue: ptr.To("fish")},
			"version": {VersionValue: ptr.To("1.0.0")},
		},
		capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"quantity": {Value: resource.MustParse("1Mi")},
		},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  52,
	},
	"many": {
		expression: `device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c`,
		attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"a": {BoolValue: ptr.To(true)},
			"b": {BoolValue: ptr.To(true)},
			"c": {BoolValue: ptr.To(true)},
		},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  12,
	},
	"check_attribute_domains": {
		expression:  `device.attributes.exists_one(x, x == "dra.example.com")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"services": {StringValue: ptr.To("some_example_value")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  164,
	},
	"check_attribute_ids": {
		expression:  `device.attributes["dra.example.com"].exists_one(x, x == "services")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"services": {StringValue: ptr.To("some_example_value")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  133,
	},
	"split_attribute": {
		expression:  `device.attributes["dra.example.com"].services.split("example").size() >= 2`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"services": {StringValue: ptr.To("some_example_value")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  19,
	},
	"regexp_attribute": {
		expression:  `device.attributes["dra.example.com"].services.matches("[^a]?sym")`,
		attributes:  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"services": {StringValue: ptr.To("asymetric")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  18,
	},
	"check_capacity_domains": {
		expression:  `device.capacity.exists_one(x, x == "dra.example.com")`,
		capacity:    map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("1Mi")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  164,
	},
	"check_capacity_ids": {
		expression:  `device.capacity["dra.example.com"].exists_one(x, x == "memory")`,
		capacity:    map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("1Mi")}},
		driver:      "dra.example.com",
		expectMatch: true,
		expectCost:  133,
	},
	"expensive": {
		// The worst-case is based on the maximum number of
		// attributes and the maximum attribute name length.
		// To actually reach that expected cost at runtime, we must
		// have many attributes.
		attributes: func() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			attributes := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute)
			prefix := "dra.example.com/"
			attribute := resourceapi.DeviceAttribute{
				StringValue: ptr.To("abc"),
			}
			for i := 0; i < resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice; i++ {
				suffix := fmt.Sprintf("-%d", i)
				name := prefix + strings.Repeat("x", resourceapi.DeviceMaxIDLength-len(suffix)) + suffix
				attributes[resourceapi.QualifiedName(name)] = attribute
			}
			return attributes
		}(),
		// From https://github.com/kubernetes/kubernetes/blob/50fc400f178d2078d0ca46aee955ee26375fc437/test/integration/apiserver/cel/validatingadmissionpolicy_test.go#L2150.
		expression:       `[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))`,
		driver:           "dra.example.com",
		expectMatchError: "actual cost limit exceeded",
		expectCost:       85555551, // Exceed limit!
	},
	"allow_multiple_allocations": {
		features:                 &Features{EnableConsumableCapacity: true},
		expression:               `device.allowMultipleAllocations == true`,
		allowMultipleAllocations: ptr.To(true),
		driver:                   "dra.example.com",
		expectMatch:              true,
		expectCost:               3,
	},
	"allow_multiple_allocations_default": {
		features:                 &Features{EnableConsumableCapacity: true},
		expression:               `device.allowMultipleAllocations == false`,
		allowMultipleAllocations: nil,
		driver:                   "dra.example.com",
		expectMatch:              true,
		expectCost:               3,
	},
	"allow_multiple_allocations_false": {
		features:                 &Features{EnableConsumableCapacity: true},
		expression:               `device.allowMultipleAllocations == false`,
		allowMultipleAllocations: ptr.To(false),
		driver:                   "dra.example.com",
		expectMatch:              true,
		expectCost:               3,
	},
	"allow_multiple_allocations_new": {
		features:                 &Features{EnableConsumableCapacity: true},
		expression:               `device.allowMultipleAllocations == false`,
		allowMultipleAllocations: ptr.To(false),
		driver:                   "dra.example.com",
		expectMatch:              true,
		expectCost:               3,
	},
	"allow_multiple_allocations_enabled": {
		features:                 &Features{EnableConsumableCapacity: true},
		expression:               `device.allowMultipleAllocations == false`,
		allowMultipleAllocations: ptr.To(false),
		driver:                   "dra.example.com",
		expectMatch:              true,
		expectCost:               3,
	},
	"allow_multiple_allocations_disabled": {
		envType:            ptr.To(environment.NewExpressions),
		features:           &Features{EnableConsumableCapacity: false},
		expression:         `device.allowMultipleAllocations == false`,
		driver:             "dra.example.com",
		expectCompileError: `undefined field 'allowMultipleAllocations'`,
	},
}

type attribute struct {
	Int      *int64   `json:"int,omitempty"`
	Bool     *bool    `json:"bool,omitempty"`
	String   *string  `json:"string,omitempty"`
	Version  *string  `json:"version,omitempty"`
	Ints     []int64  `json:"ints,omitempty"`
	Bools    []bool   `json:"bools,omitempty"`
	Strings  []string `json:"strings,omitempty"`
	Versions []string `json:"versions,omitempty"`
}

type testCase struct {
	Name                     string               `json:"name"`
	Env                      *string              `json:"env"`
	Features                 *map[string]bool     `json:"features"`
	Expression               string               `json:"expression"`
	Driver                   string               `json:"driver"`
	AllowMultipleAllocations *bool                `json:"allowMultipleAllocations"`
	Attributes               map[string]attribute `json:"attributes"`
	Capacity                 map[string]string    `json:"capacity"`
	ExpectCompileError       string               `json:"expectCompileError"`
	ExpectMatchError         string               `json:"expectMatchError"`
	ExpectMatch              bool                 `json:"expectMatch"`
	ExpectCost               uint64               `json:"expectCost"`
}

func main() {
	names := make([]string, 0, len(testcases))
	for name := range testcases {
		names = append(names, name)
	}
	sort.Strings(names)
	out := json.NewEncoder(os.Stdout)
	for _, name := range names {
		tc := testcases[name]
		c := testCase{Name: name, Expression: tc.expression, Driver: tc.driver, AllowMultipleAllocations: tc.allowMultipleAllocations,
			Attributes: map[string]attribute{}, Capacity: map[string]string{}, ExpectCompileError: tc.expectCompileError,
			ExpectMatchError: tc.expectMatchError, ExpectMatch: tc.expectMatch, ExpectCost: tc.expectCost}
		if tc.envType != nil {
			env := string(*tc.envType)
			c.Env = &env
		}
		if tc.features != nil {
			c.Features = &map[string]bool{"DRAConsumableCapacity": tc.features.EnableConsumableCapacity,
				"DRAListTypeAttributes": tc.features.EnableListTypeAttributes}
		}
		for n, a := range tc.attributes {
			c.Attributes[string(n)] = attribute{Int: a.IntValue, Bool: a.BoolValue, String: a.StringValue, Version: a.VersionValue,
				Ints: a.IntValues, Bools: a.BoolValues, Strings: a.StringValues, Versions: a.VersionValues}
		}
		for n, q := range tc.capacity {
			c.Capacity[string(n)] = q.Value.String()
		}
		if err := out.Encode(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

var _ = resource.MustParse
var _ = environment.NewExpressions
var _ = ptr.To[int]
var _ resourceapi.DeviceAttribute
