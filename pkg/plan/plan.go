package plan

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kdag-dev/kdag/pkg/controller"
)

// Format is how Write prints a plan.
type Format string

const (
	// Text is one line per owner, then one indented line per node with its blockers and options
	// (PlannedNode.String), then a blank line.
	Text Format = "text"
	// Mermaid is a "%% Kind namespace/name" comment, then a Mermaid flowchart, per owner.
	Mermaid Format = "mermaid"
	// DOT is a "// Kind namespace/name" comment, then a Graphviz digraph, per owner.
	DOT Format = "dot"
	// YAML is a "# Kind namespace/name" comment, then the owner's objects as multi-document
	// YAML with Secret values redacted (Plan.WriteText).
	YAML Format = "yaml"
)

// formats are the Formats, in the order error messages list them.
var formats = []Format{Text, Mermaid, DOT, YAML}

// Options are what a Planner needs to know of an operator.
type Options struct {
	// Scheme knows every owner type and every type their graphs add. Required.
	Scheme *runtime.Scheme
	// Components are the operator's components: their owner kinds are the ones planned, in a
	// file and as children. Required: at least one.
	Components []controller.Component
	// CRDs holds the CustomResourceDefinition manifests of the owner kinds (.yaml, .yml or .json
	// files at any depth; other files and other kinds are skipped), whose structural schemas
	// default the owners as the API server would. Default nil: owners are planned as written.
	CRDs fs.FS
	// RESTConfig reaches the cluster of a live plan (Run with --live). Default nil: the
	// kubeconfig of --kubeconfig and --context, as kubectl loads it.
	RESTConfig *rest.Config
	// Parallel bounds the reads and dry runs of a live plan in flight at once; in a fleet plan
	// (--all), the owners planned at once, each one's requests one after the other. Default 0: 8.
	Parallel int
}

// Planner plans owners of the kinds of an operator's components. It holds no state between
// calls; its methods may be called concurrently.
type Planner struct {
	scheme     *runtime.Scheme
	components map[schema.GroupKind]controller.Component
	schemas    map[schema.GroupVersionKind]*structuralschema.Structural
}

// New returns a Planner for opts. It returns an error when opts has no scheme or no component,
// when a component's owner type is not in the scheme or two components reconcile one kind, and
// when a YAML or JSON file of opts.CRDs cannot be read or parsed.
func New(opts Options) (*Planner, error) {
	if opts.Scheme == nil {
		return nil, errors.New("plan.New: Options.Scheme is required")
	}
	if len(opts.Components) == 0 {
		return nil, errors.New("plan.New: Options.Components is empty: pass the operator's components")
	}
	p := &Planner{
		scheme:     opts.Scheme,
		components: map[schema.GroupKind]controller.Component{},
		schemas:    map[schema.GroupVersionKind]*structuralschema.Structural{},
	}
	for _, c := range opts.Components {
		gvk, err := apiutil.GVKForObject(c.NewOwner(), opts.Scheme)
		if err != nil {
			return nil, errors.Wrapf(err, "plan.New: component %s", c.Name())
		}
		if other, ok := p.components[gvk.GroupKind()]; ok {
			return nil, errors.Errorf("plan.New: components %s and %s both reconcile %s", other.Name(), c.Name(), gvk.GroupKind())
		}
		p.components[gvk.GroupKind()] = c
	}
	if opts.CRDs != nil {
		if err := p.readSchemas(opts.CRDs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// readSchemas keeps the schema of every version of every CustomResourceDefinition in the .yaml,
// .yml and .json files of fsys; other files and documents of other kinds are skipped.
func (p *Planner) readSchemas(fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
			return errors.WithStack(err)
		}
		raw, err := fs.ReadFile(fsys, path)
		if err != nil {
			return errors.WithStack(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return errors.Wrapf(err, "plan.New: parse CRD file %s", path)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
					st, err := structural(v.Schema.OpenAPIV3Schema)
					if err != nil {
						return errors.Wrapf(err, "plan.New: CRD %s version %s in %s", crd.Name, v.Name, path)
					}
					gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
					p.schemas[gvk] = st
				}
			}
		}
	})
}

// Decode reads the owners in r, a YAML or JSON stream of one or more documents: each document of
// a kind a component reconciles, defaulted with its CRD schema, given namespace when it has none
// and a placeholder UID, as a typed object of the scheme. Other documents (the user's Secrets,
// a kustomization) are skipped. It returns an error when a document is not YAML or does not
// decode into its Go type.
func (p *Planner) Decode(r io.Reader, namespace string) ([]client.Object, error) {
	var owners []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return owners, nil
		} else if err != nil {
			return nil, errors.WithStack(err)
		}
		if len(u.Object) == 0 || !p.reconciled(u.GroupVersionKind().GroupKind()) {
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

// Walk plans each owner, then each child owner its plan holds (a node of a kind a component
// reconciles, defaulted as Decode does), breadth first, calling visit with each owner and its
// plan. It returns the first error of a plan (wrapped with the owner's "Kind namespace/name"),
// of a child's conversion, or of visit.
func (p *Planner) Walk(ctx context.Context, owners []client.Object, visit func(owner client.Object, plan *Plan) error) error {
	queue := slices.Clone(owners)
	for len(queue) > 0 {
		owner := queue[0]
		queue = queue[1:]
		gvk, err := apiutil.GVKForObject(owner, p.scheme)
		if err != nil {
			return errors.Wrapf(err, "%s/%s", owner.GetNamespace(), owner.GetName())
		}
		c, ok := p.components[gvk.GroupKind()]
		if !ok {
			return errors.Errorf("%s: no component reconciles %s", title(gvk, owner), gvk.GroupKind())
		}
		plan, err := c.Plan(ctx, owner, p.scheme, nil)
		if err != nil {
			return errors.Wrap(err, title(gvk, owner))
		}
		if err := visit(owner, plan); err != nil {
			return err
		}
		children, err := p.children(plan)
		if err != nil {
			return errors.Wrap(err, title(gvk, owner))
		}
		queue = append(queue, children...)
	}
	return nil
}

// Write writes the plan of each owner and of its children (Walk's order) to w in format. It
// returns an error for an unknown format, and the errors of Walk and of w.
func (p *Planner) Write(ctx context.Context, w io.Writer, owners []client.Object, format Format) error {
	if err := format.validate(); err != nil {
		return err
	}
	return p.Walk(ctx, owners, func(owner client.Object, plan *Plan) error {
		gvk, err := apiutil.GVKForObject(owner, p.scheme)
		if err != nil {
			return errors.WithStack(err)
		}
		return writePlan(w, title(gvk, owner), plan, format)
	})
}

// writePlan writes one owner's plan, titled, in format.
func writePlan(w io.Writer, title string, plan *Plan, format Format) error {
	var b bytes.Buffer
	var err error
	switch format {
	case Mermaid:
		fmt.Fprintf(&b, "%%%% %s\n", title)
		err = plan.WriteMermaid(&b)
		b.WriteString("\n")
	case DOT:
		fmt.Fprintf(&b, "// %s\n", title)
		err = plan.WriteDOT(&b)
		b.WriteString("\n")
	case YAML:
		fmt.Fprintf(&b, "# %s\n", title)
		err = plan.WriteText(&b)
	case Text:
		fmt.Fprintln(&b, title)
		for _, n := range plan.Nodes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
		b.WriteString("\n")
	}
	if err != nil {
		return errors.Wrap(err, title)
	}
	_, err = w.Write(b.Bytes())
	return errors.WithStack(err)
}

// validate returns an error naming the formats when f is none of them.
func (f Format) validate() error {
	if slices.Contains(formats, f) {
		return nil
	}
	return errors.Errorf("unknown output %q: use text, mermaid, dot or yaml", string(f))
}

// children returns the nodes of plan that are owners of a component's kind, defaulted and typed.
func (p *Planner) children(plan *Plan) ([]client.Object, error) {
	var children []client.Object
	for _, n := range plan.Nodes {
		if !p.reconciled(schema.GroupKind{Group: n.ID.Group, Kind: n.ID.Kind}) {
			continue
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n.Object)
		if err != nil {
			return nil, errors.Wrapf(err, "child %s", n.ID)
		}
		u := &unstructured.Unstructured{Object: raw}
		u.SetGroupVersionKind(n.GVK)
		child, err := p.typed(u)
		if err != nil {
			return nil, err
		}
		children = append(children, child)
	}
	return children, nil
}

// typed defaults u with its CRD schema and converts it to its Go type, with a placeholder UID
// when it has none (the owner is not created: its children's owner references need one).
func (p *Planner) typed(u *unstructured.Unstructured) (client.Object, error) {
	applyDefaults(u.Object, p.schemas[u.GroupVersionKind()])
	obj, err := p.scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, errors.WithStack(err)
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, errors.Errorf("%s %s: %T is not a client.Object", u.GetKind(), u.GetName(), obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, co); err != nil {
		return nil, errors.Wrapf(err, "decode %s %s", u.GetKind(), u.GetName())
	}
	co.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	if co.GetUID() == "" {
		co.SetUID("00000000-0000-0000-0000-000000000000")
	}
	return co, nil
}

// reconciled reports whether a component reconciles gk.
func (p *Planner) reconciled(gk schema.GroupKind) bool {
	_, ok := p.components[gk]
	return ok
}

// title is "Kind namespace/name", the heading of an owner's plan.
func title(gvk schema.GroupVersionKind, owner client.Object) string {
	return fmt.Sprintf("%s %s/%s", gvk.Kind, owner.GetNamespace(), owner.GetName())
}
