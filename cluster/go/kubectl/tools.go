//go:build tools

// Package tools pins the kubectl that scripts/cluster.sh builds to match the cluster's version:
// a module of its own so that its dependencies never change the other components' build.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
