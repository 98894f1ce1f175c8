// Package history is the `history` and `rollback` commands of an operator built with kdag
// (`kubectl kdag history`, `kubectl kdag rollback`): they read the revisions the Controller
// records of an owner (package revision) and apply the owner spec of one again, checked first
// with server-side dry runs and the live plan (package plan).
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/revision"
)

// Options are the operator's: its scheme, components and CRDs, as the live plan takes them
// (plan.Options; RESTConfig, when set, wins over --kubeconfig and --context).
type Options = plan.Options

// args are a command's parsed flags.
type args struct {
	command                         string
	typ, name                       string
	namespace, kubeconfig, kcontext string
	nsSet                           bool
	output                          string
	revision, to                    int64
	dryRun                          bool
}

// Run runs command ("history" or "rollback") with the words after it, writing to out:
//
//	history TYPE/NAME [-n NS] [--revision N] [-o text|yaml|json]
//	rollback TYPE/NAME --to N [-n NS] [--dry-run]
//
// (--kubeconfig and --context as kubectl's). TYPE is a component's kind ("gitea"), kind.group,
// or a resource name the cluster knows ("giteas"). history lists the owner's revisions, oldest
// first (WriteHistory), or with --revision one in full (WriteRevision). rollback checks the
// rollback to revision N (Check) and, unless --dry-run, applies the owner spec of N (Apply); with
// --dry-run it writes the live plan of the rollback instead.
//
// It returns an error for bad flags, an owner or revision that is not there, a refused rollback
// (a *RefusedError, which says why) and the errors of the API server.
func Run(ctx context.Context, command string, argv []string, out io.Writer, opts Options) error {
	a, err := parseArgs(command, argv)
	if err != nil {
		return err
	}
	s, err := connect(a, opts)
	if err != nil {
		return err
	}
	owner, err := s.readOwner(ctx, a)
	if err != nil {
		return err
	}
	records, err := List(ctx, s.client, owner)
	if err != nil {
		return err
	}
	if command == "history" {
		if a.revision == 0 {
			return WriteHistory(out, titleOf(owner), records, a.output)
		}
		rec, err := find(owner, records, a.revision)
		if err != nil {
			return err
		}
		return WriteRevision(out, titleOf(owner), rec, a.output)
	}
	rec, err := find(owner, records, a.to)
	if err != nil {
		return err
	}
	rb := &Rollback{Planner: s.planner, Client: s.client, Owner: owner, Record: rec, Parallel: opts.Parallel}
	if a.dryRun {
		return rb.DryRun(ctx, out)
	}
	return rb.Apply(ctx, out)
}

// usageError is a mistake on the command line.
type usageError struct{ error }

// IsUsage reports whether err is a mistake on the command line (bad flags or arguments).
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// parseArgs parses the words after command; its errors are usageErrors.
func parseArgs(command string, argv []string) (args, error) {
	a, err := parseFlags(command, argv)
	if err != nil {
		return a, usageError{err}
	}
	return a, nil
}

func parseFlags(command string, argv []string) (args, error) {
	a := args{command: command}
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVarP(&a.namespace, "namespace", "n", "", "namespace of the owner (default: the context's)")
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	fs.StringVar(&a.kcontext, "context", "", "kubeconfig context to use")
	if command == "history" {
		fs.StringVarP(&a.output, "output", "o", "text", "output: text, yaml or json")
		fs.Int64Var(&a.revision, "revision", 0, "show this revision in full")
	} else {
		fs.Int64Var(&a.to, "to", 0, "the revision to roll back to")
		fs.BoolVar(&a.dryRun, "dry-run", false, "check the rollback and print its live plan; write nothing")
	}
	if err := fs.Parse(argv); err != nil {
		return a, errors.Wrap(err, command)
	}
	a.nsSet = fs.Changed("namespace")
	switch rest := fs.Args(); {
	case command != "history" && command != "rollback":
		return a, errors.Errorf("unknown command %q: want history or rollback", command)
	case len(rest) == 1 && strings.Count(rest[0], "/") == 1:
		a.typ, a.name, _ = strings.Cut(rest[0], "/")
	case len(rest) == 2 && !strings.Contains(rest[0], "/"):
		a.typ, a.name = rest[0], rest[1]
	default:
		return a, errors.Errorf("%s takes one owner, TYPE/NAME; got %q", command, rest)
	}
	if a.typ == "" || a.name == "" {
		return a, errors.Errorf("%s takes TYPE/NAME", command)
	}
	switch {
	case command == "history" && a.output != "text" && a.output != "yaml" && a.output != "json":
		return a, errors.Errorf("unknown output %q for history: want text, yaml or json", a.output)
	case command == "history" && a.revision < 0:
		return a, errors.Errorf("--revision must be positive, got %d", a.revision)
	case command == "rollback" && a.to <= 0:
		return a, errors.New("rollback needs --to N, the revision to roll back to (see `kubectl kdag history TYPE/NAME`)")
	}
	return a, nil
}

// session is a connection to the cluster with the operator's planner.
type session struct {
	client    client.Client
	planner   *plan.Planner
	opts      Options
	namespace string
}

// connect loads the kubeconfig as kubectl does and connects.
func connect(a args, opts Options) (*session, error) {
	p, err := plan.New(opts)
	if err != nil {
		return nil, err
	}
	loaded := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: a.kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{CurrentContext: a.kcontext})
	cfg := opts.RESTConfig
	if cfg == nil {
		if cfg, err = loaded.ClientConfig(); err != nil {
			return nil, errors.Wrap(err, "load kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config)")
		}
	}
	ns := a.namespace
	if !a.nsSet {
		ns = "default"
		if n, _, err := loaded.Namespace(); err == nil && n != "" && opts.RESTConfig == nil {
			ns = n
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, errors.Wrap(err, "connect to the cluster")
	}
	return &session{client: c, planner: p, opts: opts, namespace: ns}, nil
}

// readOwner reads the owner a names, unstructured.
func (s *session) readOwner(ctx context.Context, a args) (*unstructured.Unstructured, error) {
	gvk, err := s.kindFor(a.typ)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: a.name}, u); err != nil {
		return nil, errors.Wrapf(err, "read %s %s/%s", gvk.Kind, s.namespace, a.name)
	}
	return u, nil
}

// kindFor returns the owner kind typ names: a component's kind or kind.group (any case), else a
// resource name the cluster's mapper knows that is a component's kind.
func (s *session) kindFor(typ string) (schema.GroupVersionKind, error) {
	var kinds []schema.GroupVersionKind
	for _, comp := range s.opts.Components {
		gvk, err := apiutil.GVKForObject(comp.NewOwner(), s.opts.Scheme)
		if err != nil {
			return schema.GroupVersionKind{}, errors.WithStack(err)
		}
		if strings.EqualFold(typ, gvk.Kind) || strings.EqualFold(typ, gvk.Kind+"."+gvk.Group) {
			return gvk, nil
		}
		kinds = append(kinds, gvk)
	}
	gvk, err := s.client.RESTMapper().KindFor(schema.ParseGroupResource(strings.ToLower(typ)).WithVersion(""))
	if err != nil {
		return schema.GroupVersionKind{}, errors.Wrapf(err, "type %s", typ)
	}
	for _, k := range kinds {
		if k.GroupKind() == gvk.GroupKind() {
			return k, nil
		}
	}
	return schema.GroupVersionKind{}, errors.Errorf("type %s: no component of this operator reconciles %s", typ, gvk.GroupKind())
}

// List returns the revisions of owner that the cluster holds (through r, uncached), oldest
// first. It returns r's error, or the error of a revision that cannot be decoded.
func List(ctx context.Context, r client.Reader, owner client.Object) ([]*revision.Record, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := r.List(ctx, list, client.InNamespace(owner.GetNamespace()),
		client.MatchingLabels{kdagv1alpha1.LabelOwnerUID: string(owner.GetUID())}); err != nil {
		return nil, errors.Wrapf(err, "list the revisions of %s", titleOf(owner))
	}
	var out []*revision.Record
	for i := range list.Items {
		rec, err := revision.Decode(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// find returns revision n of records, or an error listing the ones there are.
func find(owner client.Object, records []*revision.Record, n int64) (*revision.Record, error) {
	var have []string
	for _, r := range records {
		if r.Revision == n {
			return r, nil
		}
		have = append(have, fmt.Sprint(r.Revision))
	}
	if len(have) == 0 {
		return nil, errors.Errorf("%s has no revisions: its operator records one on each reconcile that changes its objects "+
			"(unless %s is 0)", titleOf(owner), revision.AnnotationHistoryLimit)
	}
	return nil, errors.Errorf("%s has no revision %d; it has %s (older ones are deleted beyond %s, default %d)",
		titleOf(owner), n, strings.Join(have, ", "), revision.AnnotationHistoryLimit, revision.DefaultHistoryLimit)
}

// titleOf is "Kind namespace/name".
func titleOf(owner client.Object) string {
	kind := owner.GetObjectKind().GroupVersionKind().Kind
	return kind + " " + owner.GetNamespace() + "/" + owner.GetName()
}

// WriteHistory writes records in format: text is a table, one line per revision (REVISION,
// TIME, GENERATION, OPERATOR, TRACE, CHANGES: what each action did to which objects, and the
// fields); yaml and json the records. title names the owner.
func WriteHistory(w io.Writer, title string, records []*revision.Record, format string) error {
	switch format {
	case "yaml", "json":
		return writeData(w, records, format)
	}
	if len(records) == 0 {
		_, err := fmt.Fprintf(w, "%s has no revisions\n", title)
		return errors.WithStack(err)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tTIME\tGENERATION\tOPERATOR\tTRACE\tCHANGES")
	for _, r := range records {
		trace := r.TraceID
		if trace == "" {
			trace = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", r.Revision, r.Time.UTC().Format(time.RFC3339), r.Generation,
			r.OperatorVersion, trace, summary(r, 100))
	}
	return errors.WithStack(tw.Flush())
}

// summary says what r changed in at most max characters: per action, the objects ("applied
// Deployment demo (spec.replicas)").
func summary(r *revision.Record, maxLen int) string {
	var parts []string
	for _, n := range r.Nodes {
		p := n.Action + " " + n.Kind + " " + n.Name
		if len(n.Fields) > 0 {
			p += " (" + strings.Join(n.Fields, ", ")
			if n.MoreFields > 0 {
				p += fmt.Sprintf(", +%d", n.MoreFields)
			}
			p += ")"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, "; ")
	if len(s) > maxLen {
		s = s[:maxLen-3] + "..."
	}
	return s
}

// WriteRevision writes one revision in full: in text, its facts, every object with its action and
// changed fields, and the owner spec it holds as YAML; in yaml or json the record.
func WriteRevision(w io.Writer, title string, r *revision.Record, format string) error {
	switch format {
	case "yaml", "json":
		return writeData(w, r, format)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Revision %d of %s\n", r.Revision, title)
	tw := tabwriter.NewWriter(&b, 0, 8, 1, ' ', 0)
	for _, kv := range [][2]string{
		{"Time:", r.Time.UTC().Format(time.RFC3339)}, {"Generation:", fmt.Sprint(r.Generation)}, {"Spec hash:", r.SpecHash},
		{"Operator version:", r.OperatorVersion}, {"Controller:", r.Controller}, {"Trace ID:", r.TraceID},
	} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", kv[0], kv[1])
		}
	}
	_ = tw.Flush()
	b.WriteString("  Changes:\n")
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "    %-10s  %s\n", n.Action, n.Title())
		for _, f := range n.Fields {
			fmt.Fprintf(&b, "                  %s\n", f)
		}
		if n.MoreFields > 0 {
			fmt.Fprintf(&b, "                  ... and %d more fields\n", n.MoreFields)
		}
		for _, f := range n.Drifted {
			fmt.Fprintf(&b, "                  %s (another writer's change, reverted)\n", f)
		}
	}
	spec, err := yaml.Marshal(r.Spec)
	if err != nil {
		return errors.WithStack(err)
	}
	b.WriteString("  Owner spec:\n")
	for _, line := range strings.SplitAfter(string(spec), "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	_, err = io.WriteString(w, b.String())
	return errors.WithStack(err)
}

// writeData writes v as YAML or JSON.
func writeData(w io.Writer, v any, format string) error {
	var raw []byte
	var err error
	if format == "json" {
		raw, err = json.MarshalIndent(v, "", "  ")
		raw = append(raw, '\n')
	} else {
		raw, err = yaml.Marshal(v)
	}
	if err != nil {
		return errors.WithStack(err)
	}
	_, err = w.Write(raw)
	return errors.WithStack(err)
}
