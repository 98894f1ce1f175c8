package leak

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func TestMain(m *testing.M) { os.Exit(Check(m.Run)) }

func TestCheck(t *testing.T) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	leaky := func() int {
		go func() { <-stop }()
		return 0
	}
	tests := []struct {
		name string
		run  func() int
		opts []goleak.Option
		want int
	}{
		{name: "no goroutine left", run: func() int { return 0 }, want: 0},
		{name: "the tests' failure code is kept", run: func() int { return 3 }, want: 3},
		{name: "a goroutine left fails", run: leaky, want: 1},
		{name: "an ignored goroutine does not", run: leaky, opts: []goleak.Option{goleak.IgnoreTopFunction("github.com/kdag-dev/kdag/pkg/testing/leak.TestCheck.func2.1")}, want: 0},
		// libraryLeaks: controller-runtime's goroutines fail no test binary, another one still does.
		{name: "controller-runtime's informer and handler registration are ignored", run: func() int { return handlerBeforeSync(t) }, want: 0},
		{name: "with another goroutine left, it still fails", run: func() int { handlerBeforeSync(t); return leaky() }, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.run, tc.opts...); got != tc.want {
				t.Errorf("Check = %d, want %d", got, tc.want)
			}
		})
	}
}

// handlerBeforeSync starts a cache of two namespaces against an API server that never
// answers, adds an event handler to its ConfigMap informer and stops the cache: the
// informers never sync, so controller-runtime's wait for the handler to sync never ends.
func handlerBeforeSync(t *testing.T) int {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{
		Scheme: clientgoscheme.Scheme, Mapper: mapper,
		DefaultNamespaces: map[string]cache.Config{"a": {}, "b": {}},
	})
	if err != nil {
		t.Errorf("cache.New: %v", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err == nil {
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
	}
	cancel()
	<-done
	if err != nil {
		t.Errorf("add an event handler: %v", err)
		return 2
	}
	return 0
}
