// Package input checks what the reference operator does with input it cannot trust, on the local
// kwok cluster (pkg/testing/cluster) with the operator in-process (controllers.Setup):
//
//   - a corpus of invalid and hostile owners, each refused with a clear message (at admission, or
//     Stalled/Reconciling with the reason) while a valid Gitea reconciled at the same time becomes
//     Ready (corpus_test.go);
//   - conflicts: an object kdag did not create is never overwritten, and another field manager
//     fighting over a field kdag owns gets a bounded number of repairs and a DriftConflict event
//     (conflict_test.go);
//   - secrets: known secret values appear in no log line, event, span, status or `plan` output
//     (secrets_test.go).
package input

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/pkg/testing/requests"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/pkg/tracing"
	"github.com/kdag-dev/kdag/test/internal/refop"
)

// clusterName is this package's local cluster, apart from the other test packages' so that they
// can run in parallel.
const clusterName = "kdag-rel-input"

// repoRoot is the repository, relative to this package.
const repoRoot = "../../.."

var (
	local  *cluster.Cluster
	scheme = runtime.NewScheme()
	// cl is an uncounted, uncached client for the tests' own reads and writes.
	cl client.Client
	// logs receives every log line of the process (controller-runtime's global logger and every
	// manager's), JSON at the most verbose level: the secrets test searches all of it.
	logs = &logBuffer{}
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	logger, err := newLogger(logs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(logger)
	os.Exit(leak.Check(func() int {
		return cluster.Main(cluster.Options{Name: clusterName, Log: os.Stderr}, func(c *cluster.Cluster) int {
			local = c
			cfg := rest.CopyConfig(local.Config)
			cfg.QPS, cfg.Burst = 100, 200 // the tests poll many owners at once
			if cl, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := refop.InstallCRDs(local); err != nil {
				fmt.Fprintln(os.Stderr, "install CRDs:", err)
				return 1
			}
			return m.Run()
		})
	}, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop")))
}

// newLogger returns the zap logger main.go builds from its flags, set to JSON at the most verbose
// level (--zap-log-level=10, so V(10) and below), writing to w.
func newLogger(w io.Writer) (logr.Logger, error) {
	opts := zap.Options{}
	fs := flag.NewFlagSet("zap", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-log-level=10", "--zap-encoder=json", "--zap-stacktrace-level=panic"}); err != nil {
		return logr.Logger{}, err
	}
	return zap.New(zap.UseFlagOptions(&opts), zap.WriteTo(w)), nil
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// operator is the reference operator running in the test process.
type operator struct {
	// requests records every request the operator sends.
	requests *requests.Recorder
	stop     func()
}

// startOperator runs the reference operator as main.go does (controllers.Components, controller.Setup and CacheOptions,
// the API client instrumented for tracing), limited to the namespaces ns, with opts for every
// controller. Every request it sends to the API server is recorded. The test's cleanup stops it.
func startOperator(t *testing.T, ns []string, opts ...controller.Options) *operator {
	t.Helper()
	op := &operator{requests: &requests.Recorder{}}
	cfg := rest.CopyConfig(local.Config)
	cfg.Wrap(tracing.WrapTransport)
	cfg.Wrap(op.requests.Wrap)
	components := controllers.Components(nil, append([]controller.Options{{OperatorVersion: "reliability"}}, opts...)...)
	cacheOpts := controller.CacheOptions(scheme, components...)
	cacheOpts.DefaultNamespaces = map[string]cache.Config{}
	for _, n := range ns {
		cacheOpts.DefaultNamespaces[n] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(t.Context(), mgr, components); err != nil {
		t.Fatal(err)
	}
	op.stop = running.Manager(t, mgr)
	return op
}

// events returns every Event (events.k8s.io/v1) in ns.
func events(ctx context.Context, ns string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// oneLine shortens s to one line of at most 300 characters, for failure messages.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		return s[:297] + "..."
	}
	return s
}
