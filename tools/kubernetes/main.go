// Command kubernetes is one multi-call binary for the control plane the tests run on this
// machine (as canonical/k8s-snap does): it dispatches on the name it was started under, so
// .tools/bin/kube-apiserver, kube-controller-manager and kube-scheduler are links to it. One
// binary links once. The kubelet and kube-proxy are built on their own (tools/build.sh): they
// are copied into the emulated hosts, where every megabyte costs (about 6 MB/s over SSH under
// TCG, and as much again for each containerd that imports the kube-proxy image).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "time/tzdata"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	newCommand, ok := commands[name]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "%s: start me under one of these names (a link): %s\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
