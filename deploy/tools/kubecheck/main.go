// kubecheck validates Kubernetes manifests offline, without a cluster or downloaded schemas:
// each YAML document is decoded strictly into its typed Go object from k8s.io/api (an
// unknown or duplicate field, or a value of the wrong type, is an error), then checked
// against the OpenAPI-derived schema that k8s.io/client-go embeds for server-side apply
// (structured-merge-diff: the field set and types of every built-in kind), and against a few
// rules the API server would enforce that neither covers (required names, containers with
// an image, probe ports that name a declared port). Kinds outside the client-go scheme
// (CRDs such as monitoring.coreos.com/v1 ServiceMonitor) are checked for apiVersion, kind
// and metadata.name only, and listed as such.
//
// Usage: kubecheck FILE...   ("-" reads stdin). Exit status 1 on any problem.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE... (- for stdin)")
		os.Exit(2)
	}
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	converter := applyconfigurations.NewTypeConverter(scheme.Scheme)
	problems, checked, unchecked := 0, 0, 0
	for _, file := range os.Args[1:] {
		var r io.Reader
		if file == "-" {
			r = os.Stdin
		} else {
			f, err := os.Open(file)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer f.Close()
			r = f
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for i := 0; ; i++ {
			raw, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Printf("%s: document %d: %v\n", file, i, err)
				problems++
				break
			}
			if len(bytes.TrimSpace(stripComments(raw))) == 0 {
				continue
			}
			where := fmt.Sprintf("%s: document %d", file, i)
			var u unstructured.Unstructured
			js, err := yaml.YAMLToJSON(raw)
			if err == nil {
				err = u.UnmarshalJSON(js)
			}
			if err != nil {
				fmt.Printf("%s: not a Kubernetes object: %v\n", where, err)
				problems++
				continue
			}
			gvk := u.GroupVersionKind()
			where = fmt.Sprintf("%s (%s %s)", where, gvk.Kind, u.GetName())
			if u.GetName() == "" {
				fmt.Printf("%s: metadata.name is empty\n", where)
				problems++
			}
			if !scheme.Scheme.Recognizes(gvk) {
				fmt.Printf("%s: %s is not a built-in kind: only apiVersion, kind and name checked\n", where, gvk)
				unchecked++
				continue
			}
			obj, _, err := strict.Decode(raw, nil, nil)
			if err != nil {
				fmt.Printf("%s: %v\n", where, err)
				problems++
				continue
			}
			if _, err := converter.ObjectToTyped(&u); err != nil {
				fmt.Printf("%s: schema: %v\n", where, err)
				problems++
				continue
			}
			for _, p := range rules(obj) {
				fmt.Printf("%s: %s\n", where, p)
				problems++
			}
			checked++
		}
	}
	fmt.Printf("kubecheck: %d objects validated against the built-in schemas, %d custom-resource objects checked for name only, %d problems\n", checked, unchecked, problems)
	if problems > 0 || checked == 0 {
		os.Exit(1)
	}
}

func stripComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// rules: what the API server's validation would refuse that the schema does not say.
func rules(obj runtime.Object) []string {
	var spec *corev1.PodSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec = &o.Spec.Template.Spec
		if o.Spec.Selector == nil || len(o.Spec.Selector.MatchLabels) == 0 {
			return []string{"spec.selector.matchLabels is empty"}
		}
		for k, v := range o.Spec.Selector.MatchLabels {
			if o.Spec.Template.Labels[k] != v {
				return []string{fmt.Sprintf("spec.selector %s=%s does not match the pod template's labels", k, v)}
			}
		}
	default:
		return nil
	}
	var out []string
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	if len(spec.Containers) == 0 {
		out = append(out, "the pod template has no container")
	}
	for _, c := range all {
		if c.Name == "" || c.Image == "" {
			out = append(out, fmt.Sprintf("container %q: name and image are required", c.Name))
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for what, pr := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if pr == nil || pr.HTTPGet == nil {
				continue
			}
			if n := pr.HTTPGet.Port.StrVal; n != "" {
				if _, ok := ports[n]; !ok {
					out = append(out, fmt.Sprintf("container %q: %s names port %q, which the container does not declare", c.Name, what, n))
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				out = append(out, fmt.Sprintf("container %q: volumeMount %q names no volume of the pod", c.Name, m.Name))
			}
		}
	}
	return out
}
