package controller_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

func TestReconcile_MaxParallelNodesBoundsConcurrency(t *testing.T) {
	tests := []struct {
		name        string
		maxParallel int // 0: the default
		nodes       int
		want        int
	}{
		{name: "bound 1", maxParallel: 1, nodes: 6, want: 1},
		{name: "bound 3", maxParallel: 3, nodes: 9, want: 3},
		// The default lets a layer as wide as the reference operators' widest run in one wave.
		{name: "default", nodes: controller.DefaultMaxParallelNodes + 6, want: controller.DefaultMaxParallelNodes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var running, peak atomic.Int32
			// The readiness check runs inside the node's work. Each one holds its node until
			// want nodes ran at once (or a long safety wait passed, so a broken bound fails the
			// assertion below rather than hanging): the peak is then exactly the bound.
			slow := controller.ReadyWhen(func(client.Object) (bool, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				for deadline := time.Now().Add(waitTimeout); peak.Load() < int32(tt.want) && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				return true, nil
			})
			var opts []controller.Options
			if tt.maxParallel > 0 {
				opts = append(opts, controller.Options{MaxParallelNodes: tt.maxParallel})
			}
			f := newFixture(t, funcRM{add: func(_ *testapi.Widget, b *controller.Graph) error {
				for i := range tt.nodes {
					b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i)}}, slow)
				}
				return nil
			}}, opts...)
			f.widget("app", testapi.WidgetSpec{MaxReplicas: 1})
			if err := f.reconcile("app"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if got := int(peak.Load()); got != tt.want {
				t.Errorf("at most %d nodes ran at once, want %d (independent nodes up to MaxParallelNodes)", got, tt.want)
			}
		})
	}
}
