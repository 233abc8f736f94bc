//go:build tools

// Package tools pins runc, in a module of its own: built together with containerd 2.x, minimal
// version selection would give runc a newer runtime-spec than it compiles with.
package tools

import _ "github.com/opencontainers/runc"
