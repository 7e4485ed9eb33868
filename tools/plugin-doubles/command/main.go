// pulumi-resource-command: the numa-kubelets test double of pulumi-command, serving only what
// this program uses, command:remote:Command (package remote: the Go package names the token's
// module, as in the real plugin). tests/e2e/test_command_plugin.py pins its behaviour against a
// real OpenSSH server.
package main

import (
	"context"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-go-provider/middleware/schema"

	"numa-kubelets/tools/plugin-doubles/command/remote"
	"numa-kubelets/tools/plugin-doubles/internal/double"
)

// The release this binary stands in for; tools/build.sh sets it from constraints.txt.
var version string

func main() {
	provider := infer.Provider(infer.Options{
		Metadata: schema.Metadata{
			DisplayName: "Command (numa-kubelets test double)",
			Description: "A test double of pulumi-command's command:remote:Command, not the real plugin.",
		},
		Resources: []infer.InferredResource{infer.Resource(&remote.Command{})},
	})
	// The benchmark mode (remote/benchmark.go) says so in every run that starts the plugin, as a
	// warning beside the double's identity; a value other than "1" fails the run there.
	configure := provider.Configure
	provider.Configure = func(ctx context.Context, req p.ConfigureRequest) error {
		on, err := remote.BenchmarkMode()
		if err != nil {
			return err
		}
		if on {
			p.GetLogger(ctx).Warning(remote.BenchmarkWarning)
		}
		if configure == nil {
			return nil
		}
		return configure(ctx, req)
	}
	double.Run("command", version, "pulumi-command", provider)
}
