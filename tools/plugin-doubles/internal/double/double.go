// Package double serves a numa-kubelets test double of a Pulumi provider plugin: a stand-in,
// written by this project, for a plugin the Go module proxy does not serve. Its behaviour is
// pinned against the real plugin by the conformance suites in tests/e2e.
package double

import (
	"context"
	"fmt"
	"os"

	p "github.com/pulumi/pulumi-go-provider"
)

// Run serves provider as plugin name at version, the release of real it stands in for
// (tools/build.sh sets version from constraints.txt, the pin of that plugin's Python SDK).
func Run(name, version, real string, provider p.Provider) {
	if version == "" {
		fmt.Fprintf(os.Stderr, "pulumi-resource-%s: built without -ldflags -X main.version (see tools/build.sh)\n", name)
		os.Exit(2)
	}
	identity := fmt.Sprintf("numa-kubelets test double of %s %s, not the real plugin", real, version)
	// `pulumi plugin ls` cannot tell a double from the real plugin; the engine's log of every
	// run that starts it can. Configure is the first call with the engine's logger to hand.
	configure := provider.Configure
	provider.Configure = func(ctx context.Context, req p.ConfigureRequest) error {
		p.GetLogger(ctx).Info(identity)
		if configure == nil {
			return nil
		}
		return configure(ctx, req)
	}
	if err := provider.Run(context.Background(), name, version); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", identity, err)
		os.Exit(1)
	}
}
