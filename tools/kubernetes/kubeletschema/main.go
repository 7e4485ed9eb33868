// Command kubelet-schema prints the KubeletConfiguration (kubelet.config.k8s.io/v1beta1) of the
// Kubernetes release this module builds, as the field table of numa_kubelets/kubelet_config.py
// writes it: every JSON field with its type in the core's vocabulary (bool, int, float,
// string, duration, any; {"list": T}, {"map": T}, {"object": {...}}). The unit tests compare it
// with the core's copy, so a release that adds, drops or retypes a field fails CI.
//
// `kubelet-schema decode` reads a KubeletConfiguration (YAML or JSON) on stdin and decodes it
// with the kubelet's own codecs, strictly (the kubelet's first attempt: an unknown field or a
// value of the wrong type is an error), then prints what the kubelet read, encoded back in
// v1beta1 with its defaults applied: a field it dropped is missing there.
//
// `kubelet-schema feature-gates` prints the feature gates the kubelet knows (the registrations
// of cmd/kubelet/app, so the same set the kubelet binary has), each with its versioned specs
// and the gates it depends on: the data the core checks `featureGates` with, because the
// kubelet panics on a map its feature gate refuses while it sets its configuration's defaults.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletcodec "k8s.io/kubernetes/pkg/kubelet/kubeletconfig/util/codec"

	// For its registrations only: every package the kubelet binary links adds its gates
	// to the same process-wide feature gate in its init.
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)

var (
	durationType = reflect.TypeOf(metav1.Duration{})
	timeType     = reflect.TypeOf(metav1.Time{})
	quantityType = reflect.TypeOf(resource.Quantity{})
	// logging.options.json.infoBufferSize: a quantity, or a number.
	quantityValueType = reflect.TypeOf(resource.QuantityValue{})
	// A number of nanoseconds or a duration string: the core accepts any JSON value there.
	timeOrDurationType = reflect.TypeOf(logsapi.TimeOrMetaDuration{})
	rawMessageType     = reflect.TypeOf(json.RawMessage{})
	marshalerType      = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
)

func describe(t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case durationType:
		return "duration"
	case timeType, quantityType:
		return "string"
	case timeOrDurationType, rawMessageType, quantityValueType:
		return "any"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return map[string]any{"list": describe(t.Elem())}
	case reflect.Map:
		return map[string]any{"map": describe(t.Elem())}
	case reflect.Struct:
		if reflect.PointerTo(t).Implements(marshalerType) || t.Implements(marshalerType) {
			panic(fmt.Sprintf("kubelet-schema: %s has its own JSON form: give it a rule", t))
		}
		return map[string]any{"object": fields(t)}
	}
	panic(fmt.Sprintf("kubelet-schema: no rule for %s", t))
}

// fields: the JSON fields of a struct, embedded structs inlined as encoding/json does.
func fields(t reflect.Type) map[string]any {
	out := map[string]any{}
	for i := range t.NumField() {
		field := t.Field(i)
		tag := field.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !field.IsExported() {
			continue
		}
		if field.Anonymous && name == "" && field.Type.Kind() == reflect.Struct {
			for key, value := range fields(field.Type) {
				out[key] = value
			}
			continue
		}
		if name == "" {
			name = field.Name
		}
		out[name] = describe(field.Type)
	}
	return out
}

// decode: what the kubelet reads from the file on stdin (see the package comment).
func decode() error {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		return err
	}
	object, gvk, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	internal, ok := object.(*kubeletconfig.KubeletConfiguration)
	if !ok {
		return fmt.Errorf("not a KubeletConfiguration: %v", gvk)
	}
	encoded, err := kubeletcodec.EncodeKubeletConfig(internal, kubeletv1beta1.SchemeGroupVersion)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(encoded)
	return err
}

// featureSpec: one stage of a gate, from the release it starts in (JSON of the core's table).
type featureSpec struct {
	Version                 string `json:"version"`
	Default                 bool   `json:"default"`
	LockToDefault           bool   `json:"lockToDefault,omitempty"`
	PreRelease              string `json:"preRelease"`
	MinCompatibilityVersion string `json:"minCompatibilityVersion,omitempty"`
}

// featureGates: what `kubelet-schema feature-gates` prints (see the package comment).
func featureGates() error {
	gate, ok := utilfeature.DefaultMutableFeatureGate.(featuregate.MutableVersionedFeatureGate)
	if !ok {
		return fmt.Errorf("the kubelet's feature gate is not versioned")
	}
	gates := map[string][]featureSpec{}
	for name, specs := range gate.GetAllVersioned() {
		out := make([]featureSpec, 0, len(specs))
		for _, spec := range specs {
			entry := featureSpec{
				Version:       spec.Version.String(),
				Default:       spec.Default,
				LockToDefault: spec.LockToDefault,
				PreRelease:    string(spec.PreRelease),
			}
			if spec.MinCompatibilityVersion != nil {
				entry.MinCompatibilityVersion = spec.MinCompatibilityVersion.String()
			}
			out = append(out, entry)
		}
		gates[string(name)] = out
	}
	dependencies := map[string][]string{}
	for name, needs := range gate.Dependencies() {
		if len(needs) == 0 {
			continue
		}
		names := make([]string, 0, len(needs))
		for _, need := range needs {
			names = append(names, string(need))
		}
		sort.Strings(names)
		dependencies[string(name)] = names
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	return encoder.Encode(map[string]any{
		"release":      gate.EmulationVersion().String(),
		"gates":        gates,
		"dependencies": dependencies,
	})
}

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "decode" || os.Args[1] == "feature-gates") {
		run := decode
		if os.Args[1] == "feature-gates" {
			run = featureGates
		}
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	schema := fields(reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{}))
	// TypeMeta: written by whoever writes the file, not configuration.
	delete(schema, "apiVersion")
	delete(schema, "kind")
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(schema); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
