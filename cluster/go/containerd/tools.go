//go:build tools

// Package tools pins the container runtime that scripts/cluster.sh builds: containerd 2.x injects
// CDI devices (the DRA driver needs that; Debian's containerd 1.6 does not).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
