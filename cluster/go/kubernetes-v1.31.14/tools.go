//go:build tools

// Package tools pins kube-apiserver 1.31.14, the one command built from this module
// (kubedevice.testing.components.apiserver), so `go mod tidy` keeps its dependencies in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
