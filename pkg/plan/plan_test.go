package plan_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// widgets builds a ConfigMap holding the Widget's bounds and, when its components list "child",
// a child Widget after it: an owner whose graph creates another owner.
type widgets struct{}

func (widgets) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &testapi.Widget{}}
}

func (widgets) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	cm := b.Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Data: map[string]string{
			"min": strconv.Itoa(int(w.Spec.MinReplicas)),
			"max": strconv.Itoa(int(w.Spec.MaxReplicas)),
		},
	})
	for _, c := range w.Spec.Components {
		if c == "child" {
			b.Add(&testapi.Widget{
				ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-child"},
				Spec:       testapi.WidgetSpec{MaxReplicas: 3},
			}, controller.DependsOn(cm))
		}
	}
	return nil
}

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	return testapi.NewScheme()
}

func options(t testing.TB) plan.Options {
	return plan.Options{
		Scheme:     newScheme(t),
		Components: []controller.Component{controller.For("widget", widgets{})},
		CRDs:       os.DirFS("../testing/testapi/crd"),
	}
}

func newPlanner(t testing.TB) *plan.Planner {
	t.Helper()
	p, err := plan.New(options(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNew_Errors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*plan.Options)
		wantErr string
	}{
		{"no scheme", func(o *plan.Options) { o.Scheme = nil }, "Scheme is required"},
		{"no component", func(o *plan.Options) { o.Components = nil }, "Components is empty"},
		{"owner type not in the scheme", func(o *plan.Options) { o.Scheme = runtime.NewScheme() }, "component widget"},
		{"two components of one kind", func(o *plan.Options) {
			o.Components = append(o.Components, controller.For("other", widgets{}))
		}, "components widget and other both reconcile Widget.testing.kdag.dev"},
		{"CRD file that does not parse", func(o *plan.Options) {
			o.CRDs = fstest.MapFS{"bad.yaml": {Data: []byte("spec: [")}}
		}, "parse CRD file bad.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := options(t)
			tc.change(&opts)
			_, err := plan.New(opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestNew_SkipsFilesThatAreNoCRD(t *testing.T) {
	opts := options(t)
	opts.CRDs = fstest.MapFS{
		"embed.go":           {Data: []byte("package crd")},
		"kustomization.yaml": {Data: []byte("resources: [bases/a.yaml]")},
	}
	if _, err := plan.New(opts); err != nil {
		t.Fatalf("New = %v, want files that hold no CRD skipped", err)
	}
}

func TestDecode(t *testing.T) {
	stream := `
apiVersion: v1
kind: ConfigMap
metadata: {name: not-an-owner}
---
---
apiVersion: testing.kdag.dev/v1alpha1
kind: Widget
metadata: {name: a}
spec: {minReplicas: 2}
---
{"apiVersion": "testing.kdag.dev/v1alpha1", "kind": "Widget", "metadata": {"name": "b", "namespace": "other", "uid": "u-1"}, "spec": {"maxReplicas": 4}}
`
	owners, err := newPlanner(t).Decode(strings.NewReader(stream), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 2 {
		t.Fatalf("%d owners, want the 2 Widgets", len(owners))
	}
	a, b := owners[0].(*testapi.Widget), owners[1].(*testapi.Widget)
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"a's namespace (the default one)", a.Namespace, "team-a"},
		{"a's minReplicas (written)", a.Spec.MinReplicas, int32(2)},
		{"a's maxReplicas (the CRD's default)", a.Spec.MaxReplicas, int32(10)},
		{"a's UID (a placeholder)", string(a.UID), "00000000-0000-0000-0000-000000000000"},
		{"a's kind", a.GetObjectKind().GroupVersionKind().Kind, "Widget"},
		{"b's namespace (its own)", b.Namespace, "other"},
		{"b's UID (its own)", string(b.UID), "u-1"},
		{"b's maxReplicas (written)", b.Spec.MaxReplicas, int32(4)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.what, tc.got, tc.want)
		}
	}
}

func TestDecode_Errors(t *testing.T) {
	p := newPlanner(t)
	for _, tc := range []struct{ name, stream, wantErr string }{
		{"not YAML", "kind: [", "yaml"},
		{"field of the wrong type", "apiVersion: testing.kdag.dev/v1alpha1\nkind: Widget\nmetadata: {name: a}\nspec: {maxReplicas: many}\n", "decode Widget a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Decode(strings.NewReader(tc.stream), "default")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Decode = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// decodeFile decodes testdata/widgets.yaml: the Widget shop, whose graph holds shop-child.
func decodeFile(t *testing.T, p *plan.Planner) []client.Object {
	t.Helper()
	raw, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	owners, err := p.Decode(bytes.NewReader(raw), "default")
	if err != nil {
		t.Fatal(err)
	}
	return owners
}

func TestWalk_VisitsChildrenAfterTheirOwner(t *testing.T) {
	p := newPlanner(t)
	var visited []string
	err := p.Walk(t.Context(), decodeFile(t, p), func(owner client.Object, pl *plan.Plan) error {
		visited = append(visited, owner.GetName()+":"+strconv.Itoa(len(pl.Nodes)))
		if owner.GetUID() == "" {
			t.Errorf("%s has no UID: its objects' owner references would be empty", owner.GetName())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(visited, " "), "shop:2 shop-child:1"; got != want {
		t.Errorf("visited %q, want %q (owner, nodes)", got, want)
	}
}

func TestWalk_Errors(t *testing.T) {
	p := newPlanner(t)
	stop := func(client.Object, *plan.Plan) error { return context.Canceled }
	if err := p.Walk(t.Context(), decodeFile(t, p), stop); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk = %v, want visit's error as it is", err)
	}
	none := func(client.Object, *plan.Plan) error { return nil }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}
	if err := p.Walk(t.Context(), []client.Object{cm}, none); err == nil || !strings.Contains(err.Error(), "no component reconciles ConfigMap") {
		t.Errorf("Walk(ConfigMap) = %v, want no component", err)
	}
}

func TestWrite(t *testing.T) {
	p := newPlanner(t)
	for _, tc := range []struct {
		format plan.Format
		want   []string
	}{
		{plan.Text, []string{
			"Widget default/shop\n  ConfigMap default/shop\n  Widget default/shop-child  (after ConfigMap default/shop)\n\n",
			"Widget default/shop-child\n  ConfigMap default/shop-child\n\n",
		}},
		{plan.Mermaid, []string{"%% Widget default/shop\nflowchart TD\n", "%% Widget default/shop-child\nflowchart TD\n", "  n0 --> n1\n"}},
		{plan.DOT, []string{"// Widget default/shop\ndigraph {\n", "// Widget default/shop-child\ndigraph {\n", "  n0 -> n1;\n"}},
		{plan.YAML, []string{"# Widget default/shop\n", "# Widget default/shop-child\n", "  max: \"10\"\n", "  max: \"3\"\n"}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var out bytes.Buffer
			if err := p.Write(t.Context(), &out, decodeFile(t, p), tc.format); err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
	if err := p.Write(t.Context(), &bytes.Buffer{}, nil, "json"); err == nil || !strings.Contains(err.Error(), `unknown output "json"`) {
		t.Errorf("Write(json) = %v, want unknown output", err)
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := plan.Run(t.Context(), []string{"-f", "testdata/widgets.yaml", "-n", "team-a"}, &out, options(t)); err != nil {
		t.Fatal(err)
	}
	if want := "Widget team-a/shop\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("output does not start with %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "change-me") || strings.Contains(out.String(), "user-secret") {
		t.Errorf("output shows the file's Secret, which no component reconciles:\n%s", out.String())
	}
}

func TestRun_Errors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		change  func(*plan.Options)
		wantErr string
	}{
		{"no file", []string{"-o", "text"}, nil, "-f is required"},
		{"unknown flag", []string{"-x"}, nil, "-x"},
		{"unknown format", []string{"-f", "testdata/widgets.yaml", "-o", "json"}, nil, `unknown output "json"`},
		{"missing file", []string{"-f", "testdata/absent.yaml"}, nil, "no such file"},
		{"no owner in the file", []string{"-f", "../testing/testapi/crd/testing.kdag.dev_widgets.yaml"}, nil, "holds no object"},
		{"bad options", []string{"-f", "testdata/widgets.yaml"}, func(o *plan.Options) { o.Components = nil }, "Components is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := options(t)
			if tc.change != nil {
				tc.change(&opts)
			}
			var out bytes.Buffer
			err := plan.Run(t.Context(), tc.args, &out, opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Run(%v) = %v, want an error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
}
