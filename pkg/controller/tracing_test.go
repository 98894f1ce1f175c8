package controller_test

import (
	"context"
	"testing"

	"github.com/opentracing/opentracing-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/apply"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// tracedRM: ConfigMap "good", Service "svc" after it, ConfigMap "bad" (an invalid key: the API
// server rejects it) and ConfigMap "after-bad" blocked by it. AddResources opens an OpenTracing
// span, as Harbor-Operator components do.
type tracedRM struct{}

func (tracedRM) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Service{}}
}

func (tracedRM) AddResources(ctx context.Context, _ *testapi.Widget, b *controller.Graph) error {
	span, _ := opentracing.StartSpanFromContext(ctx, "opentracing in AddResources")
	defer span.Finish()
	good := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "good"}, Data: map[string]string{"k": "v"}})
	b.Add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, controller.DependsOn(good))
	bad := b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Data: map[string]string{"bad key!": "v"}})
	b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-bad"}}, controller.DependsOn(bad))
	return nil
}

func TestTracing_SpanTreeLinksAndBridge(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	shutdown, err := tracing.Setup(context.Background(), tracing.WithExporter(exporter), tracing.WithSyncer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })

	f := newFixture(t, tracedRM{})
	f.widget("traced", testapi.WidgetSpec{MaxReplicas: 1})
	_ = f.reconcile("traced") // creates good and svc; bad fails; after-bad is blocked
	f.waitCached(&corev1.ConfigMap{}, "good", "good cached", func() bool { return true })
	f.waitCached(&corev1.Service{}, "svc", "svc cached", func() bool { return true })
	exporter.Reset()
	if err := f.reconcile("traced"); err == nil {
		t.Fatal("reconcile with an invalid node: want an error")
	}

	spans := exporter.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	if len(byName[controller.SpanReconcile]) != 1 {
		t.Fatalf("want one reconcile span, got %d (spans: %v)", len(byName[controller.SpanReconcile]), names(spans))
	}
	root := byName[controller.SpanReconcile][0]
	for _, name := range []string{controller.SpanBuildGraph, controller.SpanRunGraph} {
		if len(byName[name]) != 1 || byName[name][0].Parent.SpanID() != root.SpanContext.SpanID() {
			t.Fatalf("%q span missing or not a child of reconcile", name)
		}
	}
	ot := byName["opentracing in AddResources"]
	if len(ot) != 1 || ot[0].SpanContext.TraceID() != root.SpanContext.TraceID() ||
		ot[0].Parent.SpanID() != byName[controller.SpanBuildGraph][0].SpanContext.SpanID() {
		t.Fatalf("the OpenTracing span does not nest under the build graph span: %+v", ot)
	}

	nodes := map[string]tracetest.SpanStub{}
	for _, s := range byName[controller.SpanNode] {
		nodes[attr(s, controller.AttrName)] = s
		if s.Parent.SpanID() != byName[controller.SpanRunGraph][0].SpanContext.SpanID() {
			t.Errorf("node span %s is not a child of run graph", attr(s, controller.AttrName))
		}
	}
	tests := []struct {
		node, action, outcome string
		errored               bool
	}{
		{node: "good", action: string(apply.Skipped), outcome: "Ready"},
		{node: "svc", action: string(apply.Skipped), outcome: "Ready"},
		{node: "bad", action: string(apply.Created), outcome: "Failed", errored: true},
		{node: "after-bad", outcome: "Blocked"},
	}
	for _, tt := range tests {
		s, ok := nodes[tt.node]
		if !ok {
			t.Errorf("no node span for %s", tt.node)
			continue
		}
		if got := attr(s, controller.AttrAction); got != tt.action {
			t.Errorf("node %s action = %q, want %q", tt.node, got, tt.action)
		}
		if got := attr(s, controller.AttrOutcome); got != tt.outcome {
			t.Errorf("node %s outcome = %q, want %q", tt.node, got, tt.outcome)
		}
		if errored := s.Status.Code.String() == "Error"; errored != tt.errored {
			t.Errorf("node %s span error = %v, want %v", tt.node, errored, tt.errored)
		}
	}
	svc := nodes["svc"]
	if len(svc.Links) != 1 || svc.Links[0].SpanContext.SpanID() != nodes["good"].SpanContext.SpanID() {
		t.Errorf("svc span links %v: want one link to the span of its blocker good", svc.Links)
	}
	if got := attr(nodes["after-bad"], controller.AttrBlockedBy); got == "" {
		t.Errorf("blocked node span has no %s attribute", controller.AttrBlockedBy)
	}
	var applies int
	for _, s := range byName[controller.SpanApply] {
		if s.Parent.SpanID() == nodes["bad"].SpanContext.SpanID() {
			applies++
		}
	}
	if applies != 1 {
		t.Errorf("want one apply span under node bad, got %d", applies)
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}
