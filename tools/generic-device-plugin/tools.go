//go:build tools

// Package tools pins the generic device plugin's module, whose root is its main package:
// tools/build.sh builds it as `go build github.com/squat/generic-device-plugin`.
package tools

import _ "github.com/squat/generic-device-plugin"
