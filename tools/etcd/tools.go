//go:build tools

// Package tools pins etcd's server module, whose root is the etcd main package:
// tools/build.sh builds it as `go build go.etcd.io/etcd/server/v3`.
package tools

import _ "go.etcd.io/etcd/server/v3"
