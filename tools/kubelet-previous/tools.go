//go:build tools

// Package tools pins the previous Kubernetes minor's kubelet, for the rolling-upgrade tests
// (an upgrade from it to the kubelet of tools/kubernetes, within the supported skew):
// tools/build.sh builds it as `go build k8s.io/kubernetes/cmd/kubelet`.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
