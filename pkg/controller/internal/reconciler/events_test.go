package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	oteltrace "go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// noteRecorder keeps the notes of the events recorded through Eventf.
type noteRecorder struct {
	recorder.EventRecorder
	notes []string
}

func TestObjectsEvent_Note(t *testing.T) {
	ids := func(n int) []graph.NodeID {
		out := make([]graph.NodeID, n)
		for i := range out {
			out[i] = graph.NodeID{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprintf("cm-%02d", i)}
		}
		return out
	}
	tests := []struct {
		name string
		ids  []graph.NodeID
		want []string
	}{
		{name: "none", ids: nil, want: nil},
		{name: "one", ids: ids(1), want: []string{"Pruned: Deleted ConfigMap ns/cm-00: no longer part of the graph"}},
		{name: "three", ids: ids(3), want: []string{"Pruned: Deleted 3 objects: no longer part of the graph: ConfigMap ns/cm-00, ConfigMap ns/cm-01, ConfigMap ns/cm-02"}},
		{name: "more than named", ids: ids(12), want: []string{"Pruned: Deleted 12 objects: no longer part of the graph: " +
			"ConfigMap ns/cm-00, ConfigMap ns/cm-01, ConfigMap ns/cm-02, ConfigMap ns/cm-03, ConfigMap ns/cm-04, " +
			"ConfigMap ns/cm-05, ConfigMap ns/cm-06, ConfigMap ns/cm-07, ConfigMap ns/cm-08, ConfigMap ns/cm-09 and 2 more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &noteRecorder{}
			c := &Reconciler{recorder: rec}
			c.objectsEvent(t.Context(), &testapi.Widget{}, "Pruned", "Deleted", ": no longer part of the graph", tt.ids)
			if !slices.Equal(rec.notes, tt.want) {
				t.Errorf("notes %q\nwant  %q", rec.notes, tt.want)
			}
		})
	}
}

// TestEvent_NoteEndsWithTheTraceID (issue 15): an event of a traced reconcile ends with its
// trace ID, kept whole when the note is cut to the Events API's 1 kB; without a span, no suffix.
func TestEvent_NoteEndsWithTheTraceID(t *testing.T) {
	traceID := oteltrace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	traced := oteltrace.ContextWithSpanContext(t.Context(), oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: traceID, SpanID: oteltrace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: oteltrace.FlagsSampled}))
	long := strings.Repeat("x", 2000)
	tests := []struct {
		name      string
		ctx       context.Context
		msg       string
		want      string
		wantBytes int
	}{
		{name: "untraced", ctx: t.Context(), msg: "short", want: "Ready: short"},
		{name: "traced", ctx: traced, msg: "short", want: "Ready: short (trace 4bf92f3577b34da6a3ce929d0e0e4736)"},
		{name: "traced and long", ctx: traced, msg: long, wantBytes: maxEventNote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &noteRecorder{}
			c := &Reconciler{recorder: rec}
			c.event(tt.ctx, &testapi.Widget{}, corev1.EventTypeNormal, "Ready", "%s", tt.msg)
			if len(rec.notes) != 1 {
				t.Fatalf("notes %q, want one", rec.notes)
			}
			note := strings.TrimPrefix(rec.notes[0], "Ready: ")
			switch {
			case tt.want != "" && rec.notes[0] != tt.want:
				t.Errorf("note %q, want %q", rec.notes[0], tt.want)
			case tt.wantBytes != 0 && (len(note) != tt.wantBytes || !strings.HasSuffix(note, "... (trace 4bf92f3577b34da6a3ce929d0e0e4736)")):
				t.Errorf("note of %d bytes ending %q, want %d bytes ending with the whole trace ID", len(note), note[len(note)-60:], tt.wantBytes)
			}
		})
	}
}

func (r *noteRecorder) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	r.notes = append(r.notes, reason+": "+fmt.Sprintf(note, args...))
}
