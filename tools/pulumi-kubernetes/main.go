// Command pulumi-resource-kubernetes is the provider's own main
// (provider/cmd/pulumi-resource-kubernetes), which cannot be built from the module cache:
// it embeds schema-embed.json and terraform-mapping-embed.json, files its release build
// generates and git ignores. tools/build.sh generates them into gen/ (ignored here too)
// with the provider's own generate.go, from the schema.json and terraform-mapping.json its
// module ships.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed gen/schema-embed.json
var pulumiSchema []byte

//go:embed gen/terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
