// pulumi-resource-random: the numa-kubelets test double of pulumi-random 4.21.4, serving only
// what this program uses, `random:index/randomString:RandomString` and
// `random:index/randomPassword:RandomPassword`. Their schema and behaviour are the real
// plugin's (a bridge of terraform-provider-random), read from its published schema and source
// as facts (no code of it is used):
//
//   - every argument forces a new resource (in Terraform's random_string and random_password
//     each one requires replacement), so a change of any of them, `keepers` included, is a
//     replacement with a new result, and with none the result stays;
//   - upper, lower, numeric and special are on unless set off; `number` is the deprecated name
//     of `numeric`, and the two agree; min* count characters of a class on top of the rest;
//   - RandomPassword's result and bcryptHash are secret; its id is "none", RandomString's is
//     the result itself.
//
// tests/e2e/test_random_plugin.py pins all of this.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-go-provider/middleware/schema"
	pschema "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"golang.org/x/crypto/bcrypt"

	"numa-kubelets/tools/plugin-doubles/internal/double"
)

// The release this binary stands in for; tools/build.sh sets it from constraints.txt.
var version string

func main() {
	provider := infer.Provider(infer.Options{
		Metadata: schema.Metadata{
			DisplayName: "Random (numa-kubelets test double)",
			Description: "A test double of pulumi-random's RandomString and RandomPassword, not the real plugin.",
		},
		// No Update: the framework then replaces on any change, as every argument requires.
		Resources: []infer.InferredResource{infer.Resource(&RandomString{}), infer.Resource(&RandomPassword{})},
	})
	provider.GetSchema = withModuleFormat(provider.GetSchema)
	double.Run("random", version, "pulumi-random", provider)
}

// withModuleFormat adds the real schema's meta.moduleFormat: it makes the module of
// `random:index/randomString:RandomString` "index", without which the token does not bind
// (nested modules under index are not allowed). The framework has no option for it.
func withModuleFormat(
	getSchema func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error),
) func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error) {
	return func(ctx context.Context, req p.GetSchemaRequest) (p.GetSchemaResponse, error) {
		response, err := getSchema(ctx, req)
		if err != nil {
			return response, err
		}
		var spec pschema.PackageSpec
		if err := json.Unmarshal([]byte(response.Schema), &spec); err != nil {
			return response, err
		}
		spec.Meta = &pschema.MetadataSpec{ModuleFormat: "(.*)(?:/[^/]*)"}
		encoded, err := json.Marshal(spec)
		return p.GetSchemaResponse{Schema: string(encoded)}, err
	}
}

// StringArgs are the inputs both resources take, with the real plugin's names.
type StringArgs struct {
	Keepers         map[string]string `pulumi:"keepers,optional"`
	Length          int               `pulumi:"length"`
	Upper           *bool             `pulumi:"upper,optional"`
	Lower           *bool             `pulumi:"lower,optional"`
	Numeric         *bool             `pulumi:"numeric,optional"`
	Number          *bool             `pulumi:"number,optional"`
	Special         *bool             `pulumi:"special,optional"`
	MinUpper        *int              `pulumi:"minUpper,optional"`
	MinLower        *int              `pulumi:"minLower,optional"`
	MinNumeric      *int              `pulumi:"minNumeric,optional"`
	MinSpecial      *int              `pulumi:"minSpecial,optional"`
	OverrideSpecial *string           `pulumi:"overrideSpecial,optional"`
}

// StringSettings are the arguments as the state records them, defaults filled in.
type StringSettings struct {
	Keepers         map[string]string `pulumi:"keepers,optional"`
	Length          int               `pulumi:"length"`
	Upper           bool              `pulumi:"upper"`
	Lower           bool              `pulumi:"lower"`
	Numeric         bool              `pulumi:"numeric"`
	Number          bool              `pulumi:"number"`
	Special         bool              `pulumi:"special"`
	MinUpper        int               `pulumi:"minUpper"`
	MinLower        int               `pulumi:"minLower"`
	MinNumeric      int               `pulumi:"minNumeric"`
	MinSpecial      int               `pulumi:"minSpecial"`
	OverrideSpecial *string           `pulumi:"overrideSpecial,optional"`
}

func (args StringArgs) settings() StringSettings {
	numeric := valueOr(args.Numeric, valueOr(args.Number, true))
	return StringSettings{
		Keepers:         args.Keepers,
		Length:          args.Length,
		Upper:           valueOr(args.Upper, true),
		Lower:           valueOr(args.Lower, true),
		Numeric:         numeric,
		Number:          numeric,
		Special:         valueOr(args.Special, true),
		MinUpper:        valueOr(args.MinUpper, 0),
		MinLower:        valueOr(args.MinLower, 0),
		MinNumeric:      valueOr(args.MinNumeric, 0),
		MinSpecial:      valueOr(args.MinSpecial, 0),
		OverrideSpecial: args.OverrideSpecial,
	}
}

type RandomString struct{}

func (r *RandomString) Annotate(a infer.Annotator) {
	a.SetToken("index/randomString", "RandomString")
	a.Describe(&r, "A random string (numa-kubelets test double).")
}

type RandomStringState struct {
	StringSettings
	Result string `pulumi:"result"`
}

func (*RandomString) Create(
	_ context.Context, req infer.CreateRequest[StringArgs],
) (infer.CreateResponse[RandomStringState], error) {
	state := RandomStringState{StringSettings: req.Inputs.settings()}
	if req.DryRun {
		return infer.CreateResponse[RandomStringState]{Output: state}, nil
	}
	result, err := state.generate()
	state.Result = result
	return infer.CreateResponse[RandomStringState]{ID: result, Output: state}, err
}

type RandomPassword struct{}

func (r *RandomPassword) Annotate(a infer.Annotator) {
	a.SetToken("index/randomPassword", "RandomPassword")
	a.Describe(&r, "A random string kept secret, with its bcrypt hash (numa-kubelets test double).")
}

type RandomPasswordState struct {
	StringSettings
	Result     string `pulumi:"result"     provider:"secret"`
	BcryptHash string `pulumi:"bcryptHash" provider:"secret"`
}

// WireDependencies makes the result and its hash secret whatever the inputs are (the schema's
// secret flag alone marks only the schema).
func (*RandomPassword) WireDependencies(f infer.FieldSelector, _ *StringArgs, state *RandomPasswordState) {
	f.OutputField(&state.Result).AlwaysSecret()
	f.OutputField(&state.BcryptHash).AlwaysSecret()
}

// bcrypt hashes at most 72 bytes; the real plugin documents a hash of the first 72.
const bcryptMaxBytes = 72

func (*RandomPassword) Create(
	_ context.Context, req infer.CreateRequest[StringArgs],
) (infer.CreateResponse[RandomPasswordState], error) {
	state := RandomPasswordState{StringSettings: req.Inputs.settings()}
	if req.DryRun {
		return infer.CreateResponse[RandomPasswordState]{Output: state}, nil
	}
	result, err := state.generate()
	if err != nil {
		return infer.CreateResponse[RandomPasswordState]{}, err
	}
	hashed := []byte(result)[:min(len(result), bcryptMaxBytes)]
	hash, err := bcrypt.GenerateFromPassword(hashed, bcrypt.DefaultCost)
	if err != nil {
		return infer.CreateResponse[RandomPasswordState]{}, err
	}
	state.Result, state.BcryptHash = result, string(hash)
	return infer.CreateResponse[RandomPasswordState]{ID: "none", Output: state}, nil
}

const (
	upperCharacters   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lowerCharacters   = "abcdefghijklmnopqrstuvwxyz"
	numericCharacters = "0123456789"
	specialCharacters = "!@#$%&*()-_=+[]{}<>:?"
)

// generate draws each class's minimum from that class, the rest from every enabled class, and
// shuffles them, all from crypto/rand.
func (s StringSettings) generate() (string, error) {
	special := specialCharacters
	if s.OverrideSpecial != nil && *s.OverrideSpecial != "" {
		special = *s.OverrideSpecial
	}
	enabled := ""
	for _, class := range []struct {
		on         bool
		characters string
	}{{s.Upper, upperCharacters}, {s.Lower, lowerCharacters}, {s.Numeric, numericCharacters}, {s.Special, special}} {
		if class.on {
			enabled += class.characters
		}
	}
	minimums := s.MinUpper + s.MinLower + s.MinNumeric + s.MinSpecial
	switch {
	case s.Length < 1:
		return "", fmt.Errorf("length must be at least 1, not %d", s.Length)
	case s.Length < minimums:
		return "", fmt.Errorf("length %d is less than minUpper + minLower + minNumeric + minSpecial = %d", s.Length, minimums)
	case enabled == "" && s.Length > minimums:
		return "", errors.New("at least one of upper, lower, numeric and special must be true")
	}
	var result []byte
	for _, draw := range []struct {
		characters string
		count      int
	}{
		{upperCharacters, s.MinUpper}, {lowerCharacters, s.MinLower}, {numericCharacters, s.MinNumeric},
		{special, s.MinSpecial}, {enabled, s.Length - minimums},
	} {
		for range draw.count {
			index, err := randomBelow(len(draw.characters))
			if err != nil {
				return "", err
			}
			result = append(result, draw.characters[index])
		}
	}
	for i := len(result) - 1; i > 0; i-- { // Fisher-Yates
		j, err := randomBelow(i + 1)
		if err != nil {
			return "", err
		}
		result[i], result[j] = result[j], result[i]
	}
	return string(result), nil
}

func randomBelow(n int) (int, error) {
	value, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0, err
	}
	return int(value.Int64()), nil
}

func valueOr[T any](value *T, otherwise T) T {
	if value == nil {
		return otherwise
	}
	return *value
}
