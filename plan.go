package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	crds "github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// runPlan is `kdag plan -f FILE [-o text|mermaid|dot|yaml]`: it renders, without a cluster, the
// graph of every owner in FILE and of each child owner its graph creates, from the same
// AddResources code the controllers run. Objects are defaulted with the CRD schemas as the API
// server would. Secret values are never printed: generated ones show as placeholders.
func runPlan(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	file := fs.String("f", "", "file with the owner(s) to plan, e.g. config/samples/gitea.yaml")
	format := fs.String("o", "text", "output: text, mermaid, dot or yaml")
	namespace := fs.String("n", "default", "namespace of owners that have none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-f is required")
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	p, err := newPlanner()
	if err != nil {
		return err
	}
	owners, err := p.decode(raw, *namespace)
	if err != nil {
		return errors.Wrapf(err, "read %s", *file)
	}
	if len(owners) == 0 {
		return errors.Errorf("%s holds no object that a kdag controller reconciles", *file)
	}
	for len(owners) > 0 {
		owner := owners[0]
		owners = owners[1:]
		children, err := p.render(out, owner, *format)
		if err != nil {
			return err
		}
		owners = append(owners, children...)
	}
	return nil
}

// planner knows the owner kinds (from components) and their CRD schemas for defaulting.
type planner struct {
	managers map[schema.GroupKind]controller.Component
	schemas  map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps
}

func newPlanner() (*planner, error) {
	p := &planner{
		managers: map[schema.GroupKind]controller.Component{},
		schemas:  map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps{},
	}
	for _, c := range controllers.Components(nil) {
		gvk, err := apiutil.GVKForObject(c.NewOwner(), scheme)
		if err != nil {
			return nil, err
		}
		p.managers[gvk.GroupKind()] = c
	}
	err := fs.WalkDir(crds.Bases, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := crds.Bases.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return errors.Wrapf(err, "parse %s", path)
		}
		for _, v := range crd.Spec.Versions {
			p.schemas[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = v.Schema.OpenAPIV3Schema
		}
		return nil
	})
	return p, err
}

// decode reads the owners in raw (multi-document YAML), defaulted; other documents are skipped.
func (p *planner) decode(raw []byte, namespace string) ([]client.Object, error) {
	var owners []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return owners, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) == 0 || !p.known(u.GroupVersionKind().GroupKind()) {
			continue
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		obj, err := p.typed(u)
		if err != nil {
			return nil, err
		}
		owners = append(owners, obj)
	}
}

// typed defaults u with its CRD schema and converts it to its Go type.
func (p *planner) typed(u *unstructured.Unstructured) (client.Object, error) {
	if s := p.schemas[u.GroupVersionKind()]; s != nil {
		applyDefaults(u.Object, s)
	}
	obj, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, errors.Wrapf(err, "decode %s %s", u.GetKind(), u.GetName())
	}
	co := obj.(client.Object)
	co.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	if co.GetUID() == "" {
		co.SetUID("00000000-0000-0000-0000-000000000000") // placeholder: the owner is not created
	}
	return co, nil
}

// render writes owner's plan and returns the child owners its graph creates.
func (p *planner) render(out io.Writer, owner client.Object, format string) ([]client.Object, error) {
	gvk := owner.GetObjectKind().GroupVersionKind()
	title := fmt.Sprintf("%s %s/%s", gvk.Kind, owner.GetNamespace(), owner.GetName())
	plan, err := p.managers[gvk.GroupKind()].Plan(context.Background(), owner, scheme, nil)
	if err != nil {
		return nil, errors.Wrap(err, title)
	}
	switch format {
	case "mermaid":
		fmt.Fprintf(out, "%%%% %s\n", title)
		err = plan.WriteMermaid(out)
		fmt.Fprintln(out)
	case "dot":
		fmt.Fprintf(out, "// %s\n", title)
		err = plan.WriteDOT(out)
		fmt.Fprintln(out)
	case "yaml":
		fmt.Fprintf(out, "# %s\n", title)
		err = plan.WriteText(out)
	case "text":
		fmt.Fprintln(out, title)
		for _, n := range plan.Nodes {
			fmt.Fprintf(out, "  %s\n", n)
		}
		fmt.Fprintln(out)
	default:
		return nil, errors.Errorf("unknown output %q: use text, mermaid, dot or yaml", format)
	}
	if err != nil {
		return nil, err
	}
	var children []client.Object
	for _, n := range plan.Nodes {
		if !p.known(schema.GroupKind{Group: n.ID.Group, Kind: n.ID.Kind}) {
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n.Object)
		if err != nil {
			return nil, err
		}
		cu := &unstructured.Unstructured{Object: u}
		cgvk, err := apiutil.GVKForObject(n.Object, scheme)
		if err != nil {
			return nil, err
		}
		cu.SetGroupVersionKind(cgvk)
		child, err := p.typed(cu)
		if err != nil {
			return nil, err
		}
		children = append(children, child)
	}
	return children, nil
}

// applyDefaults fills x with the schema's defaults as the API server does for a structural
// schema: a missing property with a default gets a copy of it, then defaults apply inside every
// object, array item and map value, the defaulted ones included.
func applyDefaults(x any, s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch v := x.(type) {
	case map[string]any:
		for name, prop := range s.Properties {
			if _, ok := v[name]; !ok && prop.Default != nil {
				var d any
				if err := yaml.Unmarshal(prop.Default.Raw, &d); err == nil {
					v[name] = d
				}
			}
			if child, ok := v[name]; ok {
				applyDefaults(child, &prop)
			}
		}
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
			for _, child := range v {
				applyDefaults(child, ap.Schema)
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range v {
				applyDefaults(item, s.Items.Schema)
			}
		}
	}
}

// known reports whether a component reconciles gk.
func (p *planner) known(gk schema.GroupKind) bool {
	_, ok := p.managers[gk]
	return ok
}
