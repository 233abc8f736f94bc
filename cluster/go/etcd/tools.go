//go:build tools

// Package tools pins etcd's server command: `go install …@v3.6.16` refuses etcd's module because
// its go.mod has replace directives, so scripts/cluster.sh builds it from this wrapper module.
package tools

import _ "go.etcd.io/etcd/server/v3"
